/**
 * What the vendor mappings act on: a bridge session (`openSession`), or an instance reached
 * through the typed client (`agentTarget(client, instance)`, which adds bash and the edit tool),
 * and the scaling between the screen a model is told about and the instance's real one.
 */
import type {
  BashRequest,
  ComputerAction,
  EditRequest,
  Instance,
  ToolResult,
} from '../api/index.js';
import type { Burrow } from '../client/index.js';
import { decodePng, encodeRgb, pngSize, resample } from './image.js';

/** The part of a session (or `agentTarget`) the mappings use. */
export interface AgentTarget {
  /** The instance (its `resolution` is the screen size when present). */
  readonly instance?: Pick<Instance, 'id'> & { resolution?: number[] | undefined };
  computer(action: ComputerAction): Promise<ToolResult>;
  /** PNG of the screen. */
  screenshot(): Promise<Buffer>;
  /** Needed by the bash tools (a bridge session has none: use `agentTarget`). */
  bash?(request: BashRequest): Promise<ToolResult>;
  /** Needed by the text-editor tools. */
  edit?(request: EditRequest): Promise<ToolResult>;
}

/** An instance as an `AgentTarget`, with bash and the edit tool, through `client`. */
export function agentTarget(client: Burrow, instance: Instance): AgentTarget {
  const id = instance.id;
  return {
    instance,
    computer: (action) => client.instance.computer(id, action),
    screenshot: async () =>
      Buffer.from((await client.instance.screenshot(id)).base64_image, 'base64'),
    bash: (request) => client.instance.bash(id, request),
    edit: (request) => client.instance.edit(id, request),
  };
}

/** An action the model asked for that burrow cannot do as asked: an error naming it. */
export class UnsupportedActionError extends Error {
  override name = 'UnsupportedActionError';
  constructor(
    readonly vendor: 'anthropic' | 'openai',
    readonly action: string,
    detail = '',
  ) {
    super(`${vendor} computer action "${action}" is not supported${detail && `: ${detail}`}`);
  }
}

export type Size = readonly [width: number, height: number];

/** The screen size of `target`: its instance's resolution, else a screenshot's. */
export async function screenSize(target: AgentTarget): Promise<Size> {
  const r = target.instance?.resolution;
  if (r && r.length === 2 && r[0]! > 0 && r[1]! > 0) return [r[0]!, r[1]!];
  return pngSize(await target.screenshot());
}

/**
 * Maps between the model's screen (the size its tool definition declares, where its coordinates
 * live and whose size its screenshots have) and the instance's real screen.
 */
export class Scaler {
  constructor(
    readonly screen: Size,
    readonly model: Size,
  ) {}

  get identity(): boolean {
    return this.screen[0] === this.model[0] && this.screen[1] === this.model[1];
  }

  /** A model point in screen pixels (rounded, inside the screen). */
  toScreen(x: number, y: number): [number, number] {
    const sx = Math.round((x * this.screen[0]) / this.model[0]);
    const sy = Math.round((y * this.screen[1]) / this.model[1]);
    return [
      Math.max(0, Math.min(this.screen[0] - 1, sx)),
      Math.max(0, Math.min(this.screen[1] - 1, sy)),
    ];
  }

  /** A screen point in model pixels. */
  toModel(x: number, y: number): [number, number] {
    return [
      Math.round((x * this.model[0]) / this.screen[0]),
      Math.round((y * this.model[1]) / this.screen[1]),
    ];
  }

  /** A screenshot of the screen as the model sees it (resized when the sizes differ). */
  async image(base64Png: string): Promise<string> {
    if (this.identity) return base64Png;
    const img = await decodePng(Buffer.from(base64Png, 'base64'));
    const out = resample(img, [0, 0, img.width, img.height], this.model[0], this.model[1]);
    return (await encodeRgb(out)).toString('base64');
  }

  /**
   * The model-space region `[x0, y0, x1, y1]` of a screenshot, enlarged (aspect kept) to fit the
   * model's screen: what Anthropic's `zoom` shows.
   */
  async zoom(base64Png: string, region: readonly number[]): Promise<string> {
    const [ax, ay] = this.toScreen(region[0]!, region[1]!);
    const [bx, by] = this.toScreen(region[2]!, region[3]!);
    const x0 = Math.min(ax, bx);
    const y0 = Math.min(ay, by);
    const w = Math.max(1, Math.abs(bx - ax));
    const h = Math.max(1, Math.abs(by - ay));
    const fit = Math.min(this.model[0] / w, this.model[1] / h);
    const img = await decodePng(Buffer.from(base64Png, 'base64'));
    const out = resample(
      img,
      [x0, y0, x0 + w, y0 + h],
      Math.max(1, Math.round(w * fit)),
      Math.max(1, Math.round(h * fit)),
    );
    return (await encodeRgb(out)).toString('base64');
  }
}
