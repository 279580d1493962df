/**
 * The computer-action loop both instance types share (src/server/computer/runner.ts), on a
 * device that records the primitives it is asked for: actions run one at a time in the order
 * they arrive; key names are checked before any input, so an unknown one sends nothing; the
 * first failure ends the action and is reported in `error`, with the screenshot still taken;
 * a fault (not a tool failure) rejects its own action only; defaults reach the device filled in;
 * the settle pause comes only after an action that may have changed the screen and succeeded.
 * (The real devices are driven by the computer-browser and computer-ubuntu integration tests.)
 */
import { describe, expect, it } from 'vitest';
import type { ComputerAction, ParsedComputerAction } from '../../src/api/index.js';
import { ToolFailure } from '../../src/server/computer/failure.js';
import {
  ComputerRunner,
  type Click,
  type ComputerDevice,
  type Point,
  type Scroll,
} from '../../src/server/computer/runner.js';

const PNG = Buffer.from('png');

/** A device whose keys are upper-cased names (`nope` is unknown); every call is recorded. */
class Recorder implements ComputerDevice<string> {
  readonly calls: unknown[][] = [];
  settleMs = 0;
  /** Thrown by the next primitive named here. */
  failing = new Map<string, Error>();
  /** Held back until released (by the primitive's name). */
  gates = new Map<string, Promise<void>>();

  key(name: string): string | undefined {
    return name === 'nope' ? undefined : name.toUpperCase();
  }

  async #call(name: string, ...args: unknown[]): Promise<void> {
    this.calls.push([name, ...args]);
    await this.gates.get(name);
    const err = this.failing.get(name);
    if (err) {
      this.failing.delete(name);
      throw err;
    }
  }

  move = (to: Point, hold: readonly string[]) => this.#call('move', to, hold);
  click = (c: Click, hold: readonly string[]) => this.#call('click', c, hold);
  drag = (path: readonly Point[], hold: readonly string[]) => this.#call('drag', path, hold);
  scroll = (s: Scroll, hold: readonly string[]) => this.#call('scroll', s, hold);
  press = (keys: readonly string[], holdMs: number) => this.#call('press', keys, holdMs);
  type = (text: string, hold: readonly string[]) => this.#call('type', text, hold);
  cursor = async (): Promise<Point> => {
    await this.#call('cursor');
    return [12, -3];
  };
  screenshot = async (): Promise<Buffer> => {
    await this.#call('screenshot');
    return PNG;
  };
}

/** The action as the route hands it over (the schemas' output; here the input is the same). */
const act = (a: ComputerAction) => a as ParsedComputerAction;
const image = PNG.toString('base64');

describe('ComputerRunner', () => {
  it('fills in the defaults and resolves the keys before calling the device', async () => {
    const d = new Recorder();
    const run = new ComputerRunner(d);
    await run.run(act({ action: 'click_mouse', button: 'left', screenshot: false }));
    await run.run(act({ action: 'scroll', hold_keys: ['ctrl+shift'], screenshot: false }));
    await run.run(
      act({ action: 'press_key', keys: ['a', 'b'], duration: 0.25, screenshot: false }),
    );
    await run.run(act({ action: 'press_key', keys: ['Return'], screenshot: false }));
    expect(d.calls).toEqual([
      ['click', { button: 'left', kind: 'click', count: 1, at: undefined }, []],
      ['scroll', { at: undefined, deltaX: 0, deltaY: 0 }, ['CTRL', 'SHIFT']],
      ['press', ['A', 'B'], 250],
      ['press', ['RETURN'], 0],
    ]);
  });

  it('answers output, then the screenshot; no screenshot when told so', async () => {
    const d = new Recorder();
    const run = new ComputerRunner(d);
    const withShot = await run.run(act({ action: 'get_cursor_position' }));
    expect(withShot).toEqual({ output: 'X=12,Y=-3', base64_image: image });
    expect(Object.keys(withShot)).toEqual(['output', 'base64_image']);
    expect(await run.run(act({ action: 'take_screenshot', screenshot: false }))).toEqual({});
    expect(await run.run(act({ action: 'move_mouse', coordinates: [1, 2] }))).toEqual({
      base64_image: image,
    });
    expect(d.calls.map((c) => c[0])).toEqual(['cursor', 'screenshot', 'move', 'screenshot']);
  });

  it('refuses an unknown key name before any input, and still takes the screenshot', async () => {
    const d = new Recorder();
    const run = new ComputerRunner(d);
    const r = await run.run(act({ action: 'type_text', text: 'hi', hold_keys: ['shift', 'nope'] }));
    expect(r).toEqual({ error: "Unknown key name 'nope'", base64_image: image });
    expect(Object.keys(r)).toEqual(['error', 'base64_image']);
    const chord = await run.run(
      act({ action: 'press_key', keys: ['ctrl+nope'], screenshot: false }),
    );
    expect(chord).toEqual({ error: "Unknown key name 'nope'" });
    expect(d.calls).toEqual([['screenshot']]);
  });

  it("reports a device's tool failure in `error` and goes on with the next action", async () => {
    const d = new Recorder();
    d.failing.set('drag', new ToolFailure('xdotool failed: no display'));
    const run = new ComputerRunner(d);
    const path: [number, number][] = [
      [0, 0],
      [5, 5],
    ];
    const failed = await run.run(act({ action: 'drag_mouse', path }));
    expect(failed).toEqual({ error: 'xdotool failed: no display', base64_image: image });
    const next = await run.run(act({ action: 'drag_mouse', path, screenshot: false }));
    expect(next).toEqual({});
    expect(d.calls.map((c) => c[0])).toEqual(['drag', 'screenshot', 'drag']);
  });

  it('lets a fault reject its own action only, with no screenshot taken', async () => {
    const d = new Recorder();
    const fault = new TypeError('a bug');
    d.failing.set('type', fault);
    const run = new ComputerRunner(d);
    const first = run.run(act({ action: 'type_text', text: 'x' }));
    const second = run.run(act({ action: 'type_text', text: 'y' }));
    await expect(first).rejects.toBe(fault);
    expect(await second).toEqual({ base64_image: image });
    expect(d.calls).toEqual([['type', 'x', []], ['type', 'y', []], ['screenshot']]);
  });

  it('runs actions one at a time, in the order they arrive', async () => {
    const d = new Recorder();
    let open!: () => void;
    d.gates.set('move', new Promise<void>((r) => (open = r)));
    const run = new ComputerRunner(d);
    const results = [
      run.run(act({ action: 'move_mouse', coordinates: [1, 1], screenshot: false })),
      run.run(act({ action: 'type_text', text: 'a', screenshot: false })),
      run.run(act({ action: 'get_cursor_position', screenshot: false })),
    ];
    await new Promise((r) => setImmediate(r));
    expect(d.calls.map((c) => c[0])).toEqual(['move']); // the others wait for it
    open();
    expect(await Promise.all(results)).toEqual([{}, {}, { output: 'X=12,Y=-3' }]);
    expect(d.calls.map((c) => c[0])).toEqual(['move', 'type', 'cursor']);
  });

  it('waits `settleMs` before the screenshot of a successful screen-changing action', async () => {
    const d = new Recorder();
    d.settleMs = 150;
    const run = new ComputerRunner(d);
    const t0 = performance.now();
    await run.run(act({ action: 'move_mouse', coordinates: [3, 3] }));
    expect(performance.now() - t0).toBeGreaterThanOrEqual(145);
  });

  it('does not settle when nothing changed the screen, the action failed, or no shot is taken', async () => {
    const d = new Recorder();
    d.settleMs = 600_000; // a settle would outlast the test's own timeout
    const run = new ComputerRunner(d);
    for (const a of [
      { action: 'take_screenshot' },
      { action: 'get_cursor_position' },
      { action: 'wait', duration: 0 },
      { action: 'press_key', keys: ['nope'] },
      { action: 'move_mouse', coordinates: [3, 3], screenshot: false },
    ] satisfies ComputerAction[]) {
      expect(await run.run(act(a))).toBeDefined();
    }
    d.failing.set('move', new ToolFailure('no'));
    expect(await run.run(act({ action: 'move_mouse', coordinates: [3, 3] }))).toEqual({
      error: 'no',
      base64_image: image,
    });
  });

  it('waits out a `wait` action itself', async () => {
    const d = new Recorder();
    const run = new ComputerRunner(d);
    const t0 = performance.now();
    expect(await run.run(act({ action: 'wait', duration: 0.1, screenshot: false }))).toEqual({});
    expect(performance.now() - t0).toBeGreaterThanOrEqual(95);
    expect(d.calls).toEqual([]);
  });
});
