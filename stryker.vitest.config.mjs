// @ts-check
/**
 * The tests Stryker runs against each mutant (`stryker.config.mjs`): the unit tests of the
 * security modules, with the aliases of the main config. Integration tests are left out: they
 * need root and a machine set up, and take minutes per run.
 */
import { defineConfig } from 'vitest/config';
import base from './vitest.config.ts';

export const SECURITY_UNIT_TESTS = [
  'test/unit/seccomp-filter.test.ts',
  'test/unit/seccomp-build.test.ts',
  'test/unit/egress-policy.test.ts',
  'test/unit/egress-policy-edges.test.ts',
  'test/unit/egress-policy-messages.test.ts',
  'test/unit/egress-sni.test.ts',
  'test/unit/egress-sni-reasons.test.ts',
  'test/unit/egress-address.test.ts',
  'test/unit/egress-address-spellings.test.ts',
  'test/unit/egress-address-kinds.test.ts',
  'test/unit/egress-host-routes.test.ts',
  'test/unit/egress-host-lines.test.ts',
  'test/unit/egress-host-lines-edges.test.ts',
  'test/unit/egress-host-lines-bulk.test.ts',
  'test/unit/toolbox-frames.test.ts',
  'test/unit/toolbox-frames-guards.test.ts',
  'test/unit/bounds-streams.test.ts',
  'test/unit/cdp-mux.test.ts',
  'test/unit/cdp-mux-downloads.test.ts',
  'test/unit/mux-guards.test.ts',
  'test/unit/mux-bounds-exact.test.ts',
  'test/unit/mux-ownership-hooks.test.ts',
  'test/unit/mux-large-commands.test.ts',
  'test/unit/mux-navigation.test.ts',
  'test/unit/mux-client-held.test.ts',
  'test/unit/mux-refusals.test.ts',
  'test/unit/mux-lifecycle-edges.test.ts',
  'test/unit/cdp-command.test.ts',
  'test/unit/cdp-wire.test.ts',
  'test/unit/cdp-nav-trap.test.ts',
  'test/unit/cdp-refusals.test.ts',
  'test/unit/cdp-limits.test.ts',
  'test/unit/mux-inbound.test.ts',
  'test/unit/relay-unmask.test.ts',
  'test/unit/frame-reader.test.ts',
  'test/unit/inbound-gate-pipe.test.ts',
  'test/unit/inbound-gate-bounds.test.ts',
  'test/unit/unmask-assembling.test.ts',
  'test/unit/unmask-frame-edges.test.ts',
  'test/unit/unmask-stall.test.ts',
  'test/unit/log-budget.test.ts',
  'test/unit/log-budget-edges.test.ts',
  'test/unit/auth-store.test.ts',
  'test/unit/guard-auth-store.test.ts',
  'test/unit/auth-store-shared.test.ts',
  'test/unit/auth-store-dir.test.ts',
  'test/unit/auth-store-usage.test.ts',
  'test/unit/auth-store-caps.test.ts',
  'test/unit/secret-key-sources.test.ts',
  'test/unit/secret-key-rotate.test.ts',
  'test/unit/secret-key-generate.test.ts',
  'test/unit/artifacts-names.test.ts',
  'test/unit/artifacts-open.test.ts',
  'test/unit/artifacts-safe-open.test.ts',
  'test/unit/artifacts-retain.test.ts',
  'test/unit/auth-checks.test.ts',
  'test/unit/auth-checks-handoff.test.ts',
  'test/unit/sandbox-paths.test.ts',
  'test/unit/subid-ranges.test.ts',
  'test/unit/subid-ranges-edges.test.ts',
  'test/unit/sandbox-fsops.test.ts',
  'test/unit/sandbox-fsops-every-op.test.ts',
];

export default defineConfig({
  ...base,
  test: {
    ...base.test,
    include: SECURITY_UNIT_TESTS,
    reporters: ['default'],
    // a mutant that makes a test wait forever fails it here rather than as a Stryker timeout
    testTimeout: 5_000,
  },
});
