/**
 * Browser tools that act on an element of the snapshot by script, as a form does: set a field
 * (`browser_fill_form`), pick options of a `<select>`, run an agent's function on the page or on
 * an element (`browser_evaluate`).
 */
import { fail, type PageConnection } from './connection.js';
import { click, type } from './input.js';
import { NAV_TIMEOUT_MS } from './navigation.js';

/**
 * Sets one field of a form as a person would: a textbox gets the text, a checkbox is clicked
 * when its state differs from `value` ("true"/"false"), a radio is clicked, a combobox
 * selects the option, a slider takes the value.
 */
export async function fill(
  c: PageConnection,
  field: { type: string; ref: string; value: string },
): Promise<void> {
  if (field.type === 'textbox') return type(c, field.ref, field.value, false);
  if (field.type === 'combobox') {
    await selectOption(c, field.ref, [field.value]);
    return;
  }
  const objectId = await c.objectOf(field.ref);
  if (field.type === 'slider') {
    await c.callOn(
      objectId,
      `function (value) {
        this.focus();
        this.value = value;
        this.dispatchEvent(new Event('input', { bubbles: true }));
        this.dispatchEvent(new Event('change', { bubbles: true }));
      }`,
      [field.value],
    );
    return;
  }
  const checked = await c.callOn<boolean>(objectId, 'function () { return !!this.checked; }');
  const want = field.type === 'radio' ? true : field.value === 'true';
  if (checked !== want) await click(c, field.ref, {});
}

/** Selects the options whose value or label is among `values`; the values selected. */
export async function selectOption(
  c: PageConnection,
  ref: string,
  values: string[],
): Promise<string[]> {
  const objectId = await c.objectOf(ref);
  const picked = await c.callOn<string[] | string>(
    objectId,
    `function (values) {
      if (!(this instanceof HTMLSelectElement)) return 'not a <select> element';
      const chosen = [];
      for (const option of this.options) {
        const want = values.includes(option.value) || values.includes(option.label);
        if (want && (this.multiple || chosen.length === 0)) chosen.push(option);
      }
      if (chosen.length === 0) return 'no option matches ' + JSON.stringify(values);
      for (const option of this.options) option.selected = chosen.includes(option);
      this.dispatchEvent(new Event('input', { bubbles: true }));
      this.dispatchEvent(new Event('change', { bubbles: true }));
      return chosen.map((o) => o.value);
    }`,
    [values],
  );
  if (typeof picked === 'string') throw fail(`Cannot select: ${picked}`, 'select_failed');
  return picked;
}

/** Runs `fn` (a function's source, or an expression) in the page, on the element if given. */
export async function evaluate(
  c: PageConnection,
  fn: string,
  ref: string | undefined,
): Promise<unknown> {
  if (ref !== undefined) {
    const objectId = await c.objectOf(ref);
    return c.act(() =>
      c.callOn(
        objectId,
        `async function () { const f = (${fn}); return typeof f === 'function' ? await f(this) : f; }`,
      ),
    );
  }
  return c.act(() =>
    c.eval(
      `(async () => { const f = (${fn}); return typeof f === 'function' ? await f() : f; })()`,
      NAV_TIMEOUT_MS,
    ),
  );
}
