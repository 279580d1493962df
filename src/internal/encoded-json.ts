/**
 * An answer already encoded as JSON (off the main thread): the HTTP layer sends its bytes as they
 * are. Anything else that encodes it gets its value (`toJSON`), and `value()` decodes it.
 */
export class EncodedJson<T> {
  constructor(readonly bytes: Uint8Array) {}

  value(): T {
    return JSON.parse(new TextDecoder().decode(this.bytes)) as T;
  }

  toJSON(): T {
    return this.value();
  }
}

/** `answer` typed as the value it encodes, for a handler whose route sends its bytes. */
export const asAnswer = async <T>(answer: Promise<EncodedJson<T>>): Promise<T> =>
  (await answer) as unknown as T;
