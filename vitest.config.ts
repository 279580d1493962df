import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  resolve: {
    alias: [
      { find: /^burrow-sandbox\/server$/, replacement: here('./src/server/index.ts') },
      { find: /^burrow-sandbox\/agents$/, replacement: here('./src/agents/index.ts') },
      {
        find: /^burrow-sandbox\/playwright-test$/,
        replacement: here('./adapters/playwright-test/index.ts'),
      },
      { find: /^burrow-sandbox\/playwright$/, replacement: here('./adapters/playwright/index.ts') },
      { find: /^burrow-sandbox\/puppeteer$/, replacement: here('./adapters/puppeteer/index.ts') },
      { find: /^burrow-sandbox$/, replacement: here('./src/index.ts') },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', './test/reporter.ts'],
  },
});
