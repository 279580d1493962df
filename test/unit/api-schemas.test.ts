import { describe, expect, it } from 'vitest';
import {
  ComputerAction,
  FileRequest,
  Instance,
  Resolution,
  StartRequest,
  operationIds,
  operations,
} from '../../src/api/index.js';

describe('StartRequest', () => {
  it('accepts an empty body and every field at its bounds', () => {
    expect(StartRequest.safeParse({}).success).toBe(true);
    for (const timeout_hours of [0.01, 1, 24]) {
      expect(StartRequest.safeParse({ timeout_hours }).success).toBe(true);
    }
    const full = {
      instance_type: 'browser',
      timeout_hours: 2.5,
      blocked_domains: ['example.com', 'sub.example.org'],
      resolution: [1280, 720],
    };
    expect(StartRequest.parse(full)).toEqual(full);
  });

  it.each([0, 0.009, 24.01, -1, '1', null])('rejects timeout_hours %j', (timeout_hours) => {
    expect(StartRequest.safeParse({ timeout_hours }).success).toBe(false);
  });

  it('rejects unknown instance types and domains with a scheme or path', () => {
    expect(StartRequest.safeParse({ instance_type: 'mac' }).success).toBe(false);
    for (const domain of ['https://example.com', 'example.com/x', '', '-bad.com']) {
      expect(StartRequest.safeParse({ blocked_domains: [domain] }).success).toBe(false);
    }
  });
});

describe('Resolution', () => {
  it('is exactly two positive integers', () => {
    expect(Resolution.parse([1024, 768])).toEqual([1024, 768]);
    for (const bad of [[1024], [1, 2, 3], [0, 768], [1024, -1], [10.5, 768], ['1', 2], []]) {
      expect(Resolution.safeParse(bad).success, JSON.stringify(bad)).toBe(false);
    }
  });
});

describe('ComputerAction', () => {
  it('accepts each action with its required fields', () => {
    const ok: unknown[] = [
      { action: 'move_mouse', coordinates: [1, 2] },
      { action: 'click_mouse', button: 'left', num_clicks: 2, screenshot: false },
      {
        action: 'drag_mouse',
        path: [
          [0, 0],
          [5, 5],
        ],
      },
      { action: 'scroll', delta_y: 3 },
      { action: 'press_key', keys: ['ctrl', 'c'], duration: 0.5 },
      { action: 'type_text', text: 'hi', hold_keys: ['shift'] },
      { action: 'wait', duration: 1 },
      { action: 'take_screenshot' },
      { action: 'get_cursor_position' },
    ];
    for (const action of ok) expect(ComputerAction.safeParse(action).success).toBe(true);
  });

  it.each([
    {},
    { action: 'fly' },
    { action: 'move_mouse' },
    { action: 'move_mouse', coordinates: [1] },
    { action: 'click_mouse', button: 'thumb' },
    { action: 'drag_mouse', path: [] },
    { action: 'press_key', keys: [] },
    { action: 'wait' },
    { action: 'wait', duration: 61 },
    { action: 'take_screenshot', screenshot: 'yes' },
  ])('rejects %j', (action) => {
    expect(ComputerAction.safeParse(action).success).toBe(false);
  });

  it('drops unknown keys rather than failing on them', () => {
    expect(ComputerAction.parse({ action: 'take_screenshot', extra: 1 })).toEqual({
      action: 'take_screenshot',
    });
  });
});

describe('FileRequest', () => {
  it('takes any command string (unknown ones are a 200 with error) and typed options', () => {
    expect(FileRequest.safeParse({ command: 'frobnicate' }).success).toBe(true);
    expect(
      FileRequest.safeParse({ command: 'grep', pattern: 'x', recursive: true, lines: [1, 2] })
        .success,
    ).toBe(true);
  });

  it.each([{}, { command: 1 }, { command: 'read', recursive: 'yes' }, { command: 'x', line: 1.5 }])(
    'rejects %j',
    (body) => {
      expect(FileRequest.safeParse(body).success).toBe(false);
    },
  );
});

describe('response schemas', () => {
  it('tolerate unknown fields so a newer server does not break an older client', () => {
    const instance = {
      id: 'i-1',
      launch_time: '2025-01-01T00:00:00Z',
      instance_type: 'ubuntu',
      status: 'running',
      new_field: { nested: true },
    };
    expect(Instance.parse(instance)).toEqual(instance);
  });
});

describe('operation table', () => {
  it('has the 32 operations of the spec, each row with a unique method and path, start never idempotent', () => {
    // burrow's own rows say so (`extension: true`); every other row is one of the spec's
    const spec = operationIds.filter((id) => !('extension' in operations[id]));
    expect(spec).toHaveLength(32);
    const routes = new Set(
      operationIds.map((id) => `${operations[id].method} ${operations[id].path}`),
    );
    expect(routes.size).toBe(operationIds.length);
    const clients = new Set(operationIds.map((id) => operations[id].client.join('.')));
    expect(clients.size).toBe(operationIds.length);
    expect(operations.start.idempotent).toBe(false);
    expect(operations.upload.bodyKind).toBe('multipart');
  });

  it('declares a params schema exactly for paths with parameters', () => {
    for (const id of operationIds) {
      const op = operations[id];
      expect('params' in op, id).toBe(op.path.includes('{'));
    }
  });
});
