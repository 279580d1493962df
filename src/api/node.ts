/**
 * burrow extension (not in docs/spec/API.md): the node that answers, as a machine of the
 * service. `POST /v1/node/drain` (`burrow drain`, and SIGTERM on the node's own machine) makes it
 * take no new instances; its running ones go on until they end or the drain deadline. Admin key
 * only: the node is every project's.
 */
import { z } from 'zod';

/** What a drain answers (202): it has begun, and when the instances left will be stopped. */
export const DrainResult = z.looseObject({
  draining: z.literal(true),
  /** ISO 8601: the running instances still live then stop with `end_reason: "node_drained"`. */
  deadline: z.string(),
});
export type DrainResult = z.output<typeof DrainResult>;
