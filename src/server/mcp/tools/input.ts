/** Browser tools that act on an element of the snapshot: click, type, hover, select, evaluate. */
import { z } from 'zod';
import { browser, defineTool, element, instanceId, json, pageState, ref, text } from './common.js';

export const inputTools = [
  defineTool({
    name: 'browser_press_key',
    description: 'Press a key on the keyboard',
    input: z.object({
      key: z
        .string()
        .min(1)
        .describe(
          'Name of the key to press or a character to generate, such as `ArrowLeft` or `a`',
        ),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      await p.pressKey(args.key);
      return ctx.about(id, [text(`Pressed ${args.key}`), pageState(await p.state())]);
    },
  }),
  defineTool({
    name: 'browser_fill_form',
    description: 'Fill multiple form fields',
    input: z.object({
      fields: z
        .array(
          z.object({
            name: z.string().describe('Human-readable field name'),
            type: z
              .enum(['textbox', 'checkbox', 'radio', 'combobox', 'slider'])
              .describe('Type of the field'),
            ref,
            value: z
              .string()
              .describe(
                'Value to fill in the field. If the field is a checkbox, the value should be `true` or `false`. If the field is a combobox, the value should be the text of the option.',
              ),
          }),
        )
        .min(1)
        .describe('Fields to fill in'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      for (const field of args.fields) {
        p.assertNoDialog();
        await p.fill(field);
      }
      const names = args.fields.map((f) => f.name).join(', ');
      return ctx.about(id, [text(`Filled ${names}`), pageState(await p.state())]);
    },
  }),
  defineTool({
    name: 'browser_drag',
    description: 'Perform drag and drop between two elements',
    input: z.object({
      startElement: z
        .string()
        .describe(
          'Human-readable source element description used to obtain the permission to interact with the element',
        ),
      startRef: z.string().describe('Exact source element reference from the page snapshot'),
      endElement: z
        .string()
        .describe(
          'Human-readable target element description used to obtain the permission to interact with the element',
        ),
      endRef: z.string().describe('Exact target element reference from the page snapshot'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      await p.drag(args.startRef, args.endRef);
      return ctx.about(id, [
        text(`Dragged ${args.startElement} to ${args.endElement}`),
        pageState(await p.state()),
      ]);
    },
  }),
  defineTool({
    name: 'browser_click',
    description: 'Perform click on a web page',
    input: z.object({
      element,
      ref,
      doubleClick: z
        .boolean()
        .optional()
        .describe('Whether to perform a double click instead of a single click'),
      button: z
        .enum(['left', 'right', 'middle'])
        .optional()
        .describe('Button to click, defaults to left'),
      modifiers: z
        .array(z.enum(['Alt', 'Control', 'ControlOrMeta', 'Meta', 'Shift']))
        .optional()
        .describe('Modifier keys to press'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      await p.click(args.ref, {
        ...(args.button && { button: args.button }),
        ...(args.doubleClick && { doubleClick: true }),
        ...(args.modifiers && { modifiers: args.modifiers }),
      });
      return ctx.about(id, [text(`Clicked ${args.element}`), pageState(await p.state())]);
    },
  }),
  defineTool({
    name: 'browser_type',
    description: 'Type text into editable element',
    input: z.object({
      element,
      ref,
      text: z.string().describe('Text to type into the element'),
      submit: z.boolean().optional().describe('Whether to submit entered text (press Enter after)'),
      slowly: z
        .boolean()
        .optional()
        .describe('Accepted for compatibility; text is always inserted at once'),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      await p.type(args.ref, args.text, args.submit ?? false);
      return ctx.about(id, [text(`Typed into ${args.element}`), pageState(await p.state())]);
    },
  }),
  defineTool({
    name: 'browser_hover',
    description: 'Hover over element on page',
    input: z.object({ element, ref, instance_id: instanceId }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      await p.hover(args.ref);
      return ctx.about(id, [text(`Hovered ${args.element}`), pageState(await p.state())]);
    },
  }),
  defineTool({
    name: 'browser_select_option',
    description: 'Select an option in a dropdown',
    input: z.object({
      element,
      ref,
      values: z
        .array(z.string())
        .describe(
          'Array of values to select in the dropdown. This can be a single value or multiple values.',
        ),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      const picked = await p.selectOption(args.ref, args.values);
      return ctx.about(id, [
        text(`Selected ${JSON.stringify(picked)} in ${args.element}`),
        pageState(await p.state()),
      ]);
    },
  }),
  defineTool({
    name: 'browser_evaluate',
    description: 'Evaluate JavaScript expression on page or element',
    input: z.object({
      function: z
        .string()
        .describe('() => { /* code */ } or (element) => { /* code */ } when element is provided'),
      element: element.optional(),
      ref: ref.optional(),
      instance_id: instanceId,
    }),
    async handler(ctx, args) {
      const { id, page: p } = await browser(ctx, args.instance_id);
      const value = await p.evaluate(args.function, args.ref);
      const out = [text(value === undefined ? 'undefined' : json(value))];
      // the function opened a dialog: the agent must answer it before anything else runs
      if (p.modal.length > 0) out.push(pageState(await p.state()));
      return ctx.about(id, out);
    },
  }),
];
