/**
 * `burrow-sandbox/agents` against real instances: tool calls recorded in each vendor's documented
 * format (Anthropic's `tool_use` blocks for `computer_20251124`, `bash_20250124` and
 * `text_editor_20250728`; OpenAI's `computer_call` items, single and batched), written by hand
 * from the vendors' docs, replayed through `toolResult`, and each checked by what it did: the
 * playground page's own record of its events (read over CDP), or the ubuntu instance's files.
 *
 * The browser instance runs at 1920×1080, larger than Claude takes, so the Anthropic calls are in
 * the scaled-down display Anthropic's scaling rule gives (1429×804) and the OpenAI calls in a
 * declared 1280×720: the mapping must scale both ways for anything below to land.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  agentTarget,
  anthropicAgent,
  anthropicDisplaySize,
  openaiAgent,
  pngSize,
  toolResult,
  type AgentTarget,
  type AnthropicToolResult,
  type AnthropicToolUse,
  type OpenAIAgent,
  type OpenAIComputerCall,
} from 'burrow-sandbox/agents';
import { Burrow, type Instance } from '../../../src/client/index.js';
import {
  eventually,
  instanceProcesses,
  testServer,
  type TestServer,
} from '../../helpers/server.js';
import { PageProbe, startPlayground, type Playground } from '../../helpers/computer.js';

let server: TestServer;
let site: Playground;
let client: Burrow;
let browser: Instance;
let ubuntu: Instance;
let page: PageProbe;
let target: AgentTarget;

beforeAll(async () => {
  [server, site] = await Promise.all([testServer(), startPlayground()]);
  client = new Burrow({ baseUrl: server.url, apiKey: server.apiKey });
  [browser, ubuntu] = await Promise.all([
    client.instances.start({ instance_type: 'browser', resolution: [1920, 1080] }),
    client.instances.start({ instance_type: 'ubuntu' }),
  ]);
  const { cdp_url } = await client.browser.cdpUrl(browser.id);
  page = await PageProbe.open(cdp_url, site.url);
  target = agentTarget(client, browser);
}, 120_000);
afterAll(async () => {
  page?.close();
  await client?.close();
  await server?.close();
  await site?.close();
  expect(instanceProcesses()).toEqual([]);
});

const use = (id: string, name: string, input: unknown): AnthropicToolUse => ({
  type: 'tool_use',
  id,
  name,
  input,
});
const textOf = (r: AnthropicToolResult) =>
  r.content.flatMap((c) => (c.type === 'text' ? [c.text] : [])).join('\n');
const imageOf = (r: AnthropicToolResult) => {
  const img = r.content.find((c) => c.type === 'image');
  if (!img || img.type !== 'image') throw new Error(`no image in ${JSON.stringify(r)}`);
  return Buffer.from(img.source.data, 'base64');
};
const ok = (r: AnthropicToolResult) => {
  expect(r.is_error, textOf(r)).toBeUndefined();
  return r;
};

describe('Anthropic computer_20251124 calls on a 1920×1080 browser instance', () => {
  it('declares the display Anthropic’s scaling rule gives, and the tools', async () => {
    expect(anthropicDisplaySize([1920, 1080])).toEqual([1429, 804]);
    const agent = await anthropicAgent(target);
    expect(agent.tools).toEqual([
      {
        type: 'computer_20251124',
        name: 'computer',
        display_width_px: 1429,
        display_height_px: 804,
        enable_zoom: true,
      },
      { type: 'bash_20250124', name: 'bash' },
      { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' },
    ]);
    expect(agent.betaHeader).toBe('computer-use-2025-11-24');
  });

  it('screenshot comes back at the declared size', async () => {
    const r = ok(await toolResult(target, use('toolu_01', 'computer', { action: 'screenshot' })));
    expect(r.tool_use_id).toBe('toolu_01');
    expect(pngSize(imageOf(r))).toEqual([1429, 804]);
  });

  it('clicks land on the button: left, shift+left, double, right', async () => {
    // the Go button's centre is (120, 70) on the screen: (89, 52) on the model's display
    ok(
      await toolResult(
        target,
        use('toolu_02', 'computer', { action: 'left_click', coordinate: [89, 52] }),
      ),
    );
    ok(
      await toolResult(
        target,
        use('toolu_03', 'computer', { action: 'left_click', coordinate: [89, 52], text: 'shift' }),
      ),
    );
    ok(
      await toolResult(
        target,
        use('toolu_04', 'computer', { action: 'double_click', coordinate: [89, 52] }),
      ),
    );
    ok(
      await toolResult(
        target,
        use('toolu_05', 'computer', { action: 'right_click', coordinate: [89, 52] }),
      ),
    );
    await eventually(async () => (await page.state()).rightClicks === 1, 'the clicks to arrive');
    const s = await page.state();
    expect(s).toMatchObject({ clicks: 4, shiftClicks: 1, dblclicks: 1, rightClicks: 1 });
  });

  it('types, presses chords and holds keys in the field', async () => {
    // the field's centre is (190, 155) on the screen: (141, 115) on the model's display
    const calls = [
      { action: 'left_click', coordinate: [141, 115] },
      { action: 'type', text: 'hello world' },
      { action: 'key', text: 'ctrl+a' },
      { action: 'type', text: 'bye' },
      { action: 'hold_key', text: 'shift', duration: 0.2 },
    ];
    for (const [i, input] of calls.entries()) {
      ok(await toolResult(target, use(`toolu_1${i}`, 'computer', input)));
    }
    const s = await page.state();
    expect(s.value).toBe('bye');
    expect(s.keys).toContain('C-a');
    expect(s.keys).toContain('S-Shift');
  });

  it('left_click_drag and left_mouse_down/up drag on the pad', async () => {
    ok(
      await toolResult(
        target,
        use('toolu_20', 'computer', {
          action: 'left_click_drag',
          start_coordinate: [335, 67],
          coordinate: [484, 149],
        }),
      ),
    );
    let drag = (await page.state()).drag;
    expect(drag[0]![0]).toBeCloseTo(450, -1);
    expect(drag[0]![1]).toBeCloseTo(90, -1);
    expect(drag.at(-1)![0]).toBeCloseTo(650, -1);
    expect(drag.at(-1)![1]).toBeCloseTo(200, -1);

    for (const [i, input] of [
      { action: 'mouse_move', coordinate: [400, 100] },
      { action: 'left_mouse_down' },
      { action: 'mouse_move', coordinate: [450, 120] },
      { action: 'left_mouse_up' },
    ].entries()) {
      ok(await toolResult(target, use(`toolu_2${i + 1}`, 'computer', input)));
    }
    drag = (await page.state()).drag;
    expect(drag[0]![0]).toBeCloseTo(537, -1); // 400 × 1920/1429
    expect(drag.at(-1)![0]).toBeCloseTo(605, -1); // 450 × 1920/1429
  });

  it('reports the cursor in model coordinates, scrolls, waits and zooms', async () => {
    ok(
      await toolResult(
        target,
        use('toolu_30', 'computer', { action: 'mouse_move', coordinate: [89, 52] }),
      ),
    );
    const pos = ok(
      await toolResult(target, use('toolu_31', 'computer', { action: 'cursor_position' })),
    );
    expect(textOf(pos)).toBe('X=89,Y=52');

    ok(
      await toolResult(
        target,
        use('toolu_32', 'computer', {
          action: 'scroll',
          coordinate: [700, 400],
          scroll_direction: 'down',
          scroll_amount: 3,
        }),
      ),
    );
    await eventually(async () => (await page.state()).scrollY >= 300, 'the page to scroll');
    ok(await toolResult(target, use('toolu_33', 'computer', { action: 'wait', duration: 0.1 })));

    // the top-left quarter, enlarged to the display (aspect kept)
    const zoom = ok(
      await toolResult(
        target,
        use('toolu_34', 'computer', { action: 'zoom', region: [0, 0, 357, 201] }),
      ),
    );
    const [w, h] = pngSize(imageOf(zoom));
    expect(w).toBeLessThanOrEqual(1429);
    expect(h).toBeLessThanOrEqual(804);
    expect(Math.max(w / 1429, h / 804)).toBeGreaterThan(0.99);
  });

  it('an action outside the vocabulary is an error naming it; zoom needs computer_20251124', async () => {
    const r = await toolResult(target, use('toolu_40', 'computer', { action: 'teleport' }));
    expect(r.is_error).toBe(true);
    expect(textOf(r)).toContain('"teleport"');
    const old = await anthropicAgent(target, { computer: 'computer_20250124' });
    expect(old.tools[0]).toMatchObject({ type: 'computer_20250124' });
    expect(old.tools[0]).not.toHaveProperty('enable_zoom');
    const z = await old.toolResult(
      use('toolu_41', 'computer', { action: 'zoom', region: [0, 0, 10, 10] }),
    );
    expect(z.is_error).toBe(true);
    expect(textOf(z)).toContain('"zoom"');
  });

  it('a malformed input is an error result naming the field, and nothing runs', async () => {
    const before = await page.state();
    const click = await toolResult(
      target,
      use('toolu_42', 'computer', { action: 'left_click', coordinate: ['120', 70] }),
    );
    expect(click.is_error).toBe(true);
    expect(textOf(click)).toMatch(/invalid input for the computer tool[\s\S]*coordinate/);
    const scroll = await toolResult(
      target,
      use('toolu_43', 'computer', { action: 'scroll', scroll_direction: 'sideways' }),
    );
    expect(scroll.is_error).toBe(true);
    expect(textOf(scroll)).toContain('scroll_direction');
    const bash = await toolResult(target, use('toolu_44', 'bash', { command: 42 }));
    expect(bash.is_error).toBe(true);
    expect(textOf(bash)).toContain('command');
    const edit = await toolResult(target, use('toolu_45', 'str_replace_based_edit_tool', null));
    expect(edit.is_error).toBe(true);
    expect(textOf(edit)).toContain('path');
    expect(await page.state()).toEqual(before);
  });
});

describe('Anthropic bash and text editor calls on an ubuntu instance', () => {
  it('bash keeps one shell; the editor creates, replaces, inserts and views', async () => {
    const box = agentTarget(client, ubuntu);
    const run = async (id: string, name: string, input: unknown) =>
      ok(await toolResult(box, use(id, name, input)));
    await run('toolu_50', 'bash', { command: 'cd /tmp && export WHO=claude' });
    const out = await run('toolu_51', 'bash', {
      command: 'pwd; echo "hi $WHO" | tee greeting.txt',
    });
    expect(textOf(out)).toContain('/tmp\nhi claude');
    await run('toolu_52', 'bash', { restart: true });
    expect(textOf(await run('toolu_53', 'bash', { command: 'echo "[$WHO]"' }))).toContain('[]');

    const editor = 'str_replace_based_edit_tool';
    await run('toolu_54', editor, {
      command: 'create',
      path: '/home/user/plan.md',
      file_text: 'step one\nstep two\n',
    });
    await run('toolu_55', editor, {
      command: 'str_replace',
      path: '/home/user/plan.md',
      old_str: 'step two',
      new_str: 'step 2',
    });
    await run('toolu_56', editor, {
      command: 'insert',
      path: '/home/user/plan.md',
      insert_line: 0,
      insert_text: '# plan',
    });
    const view = await run('toolu_57', editor, { command: 'view', path: '/home/user/plan.md' });
    expect(textOf(view)).toMatch(/1\t# plan\n\s*2\tstep one\n\s*3\tstep 2/);
    const file = await client.instance.file(ubuntu.id, {
      command: 'read',
      path: '/home/user/plan.md',
    });
    expect(file.output).toBe('# plan\nstep one\nstep 2\n');
    expect(
      (await client.instance.file(ubuntu.id, { command: 'read', path: '/tmp/greeting.txt' }))
        .output,
    ).toBe('hi claude\n');

    const bad = await toolResult(
      box,
      use('toolu_58', editor, {
        command: 'str_replace',
        path: '/home/user/plan.md',
        old_str: 'nope',
        new_str: 'x',
      }),
    );
    expect(bad.is_error).toBe(true);
    const undo = await toolResult(
      box,
      use('toolu_59', editor, { command: 'undo_edit', path: '/home/user/plan.md' }),
    );
    expect(undo.is_error).toBe(true); // text_editor_20250728 has no undo_edit
    expect(textOf(undo)).toContain('undo_edit');
  }, 120_000);
});

describe('OpenAI computer_call items on the same browser, declared at 1280×720', () => {
  let agent: OpenAIAgent;
  const call = (call_id: string, body: Omit<OpenAIComputerCall, 'type' | 'call_id'>) =>
    agent.toolResult({
      type: 'computer_call',
      call_id,
      status: 'completed',
      ...body,
    } as OpenAIComputerCall);

  beforeAll(async () => {
    await page.load(`${site.url}?openai`);
    agent = await openaiAgent(target, { display: [1280, 720] });
  });

  it('declares the display; every answer is a screenshot at that size', async () => {
    expect(agent.tool).toEqual({
      type: 'computer_use_preview',
      display_width: 1280,
      display_height: 720,
      environment: 'browser',
    });
    const out = await call('call_01', {
      action: { type: 'screenshot' },
      pending_safety_checks: [],
    });
    expect(out.type).toBe('computer_call_output');
    expect(out.call_id).toBe('call_01');
    expect(out.output.type).toBe('computer_screenshot');
    const png = Buffer.from(out.output.image_url.replace(/^data:image\/png;base64,/, ''), 'base64');
    expect(pngSize(png)).toEqual([1280, 720]);
  });

  it('click with its buttons and double_click land on the button', async () => {
    // the Go button's centre (120, 70) is (80, 47) at 1280×720
    await call('call_02', { action: { type: 'click', x: 80, y: 47, button: 'left' } });
    await call('call_03', { action: { type: 'click', x: 80, y: 47, button: 'right' } });
    await call('call_04', { action: { type: 'double_click', x: 80, y: 47 } });
    await call('call_05', {
      action: { type: 'click', x: 80, y: 47, button: 'left', keys: ['SHIFT'] },
    });
    await eventually(async () => (await page.state()).dblclicks === 1, 'the clicks to arrive');
    expect(await page.state()).toMatchObject({
      clicks: 4,
      rightClicks: 1,
      dblclicks: 1,
      shiftClicks: 1,
    });
  });

  it('a batch of actions: click the field, type, keypress a chord, type again', async () => {
    await call('call_10', {
      actions: [
        { type: 'click', x: 127, y: 103, button: 'left' },
        { type: 'type', text: 'abc' },
        { type: 'keypress', keys: ['CTRL', 'A'] },
        { type: 'type', text: 'xyz' },
      ],
    });
    expect((await page.state()).value).toBe('xyz');
    await call('call_11', { action: { type: 'keypress', keys: ['ENTER'] } });
    expect((await page.state()).keys).toContain('Enter');
  });

  it('drag along a path, move, scroll by pixels, wait', async () => {
    await call('call_20', {
      action: {
        type: 'drag',
        path: [
          { x: 300, y: 60 },
          { x: 350, y: 100 },
          { x: 433, y: 133 },
        ],
      },
    });
    const drag = (await page.state()).drag;
    expect(drag[0]![0]).toBeCloseTo(450, -1);
    expect(drag[0]![1]).toBeCloseTo(90, -1);
    expect(drag.at(-1)![0]).toBeCloseTo(650, -1);
    expect(drag.at(-1)![1]).toBeCloseTo(200, -1);
    expect(drag.length).toBeGreaterThanOrEqual(3);

    await call('call_21', { action: { type: 'move', x: 600, y: 300 } });
    await call('call_22', {
      action: { type: 'scroll', x: 600, y: 300, scroll_x: 0, scroll_y: 400 },
    });
    await eventually(async () => (await page.state()).scrollY >= 400, 'the page to scroll');
    const t = Date.now();
    await call('call_23', { action: { type: 'wait' } });
    expect(Date.now() - t).toBeGreaterThanOrEqual(1900);
  });

  it('refuses unknown actions by name, and pending safety checks unless acknowledged', async () => {
    await expect(call('call_30', { action: { type: 'teleport' } as never })).rejects.toThrow(
      /"teleport"/,
    );
    // a known action with fields of the wrong type is refused by name before anything runs
    await expect(
      call('call_32', { action: { type: 'click', x: '80', y: 47 } as never }),
    ).rejects.toThrow(/"click"[\s\S]*x/);
    await expect(
      call('call_33', { actions: [{ type: 'screenshot' }, { type: 'keypress' }] as never }),
    ).rejects.toThrow(/"keypress"[\s\S]*keys/);
    const check = { id: 'cu_sc_1', code: 'malicious_instructions', message: 'check' };
    await expect(
      call('call_31', { action: { type: 'screenshot' }, pending_safety_checks: [check] }),
    ).rejects.toThrow(/pending safety checks \(malicious_instructions\)/);
    const approved = await openaiAgent(target, { acknowledgeSafetyChecks: true });
    const out = await approved.toolResult({
      type: 'computer_call',
      call_id: 'call_32',
      action: { type: 'screenshot' },
      pending_safety_checks: [check],
    });
    expect(out.acknowledged_safety_checks).toEqual([check]);
  });
});
