import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  resolve: {
    alias: [
      { find: /^burrow\/server$/, replacement: here('./src/server/index.ts') },
      {
        find: /^burrow\/playwright-test$/,
        replacement: here('./adapters/playwright-test/index.ts'),
      },
      { find: /^burrow\/playwright$/, replacement: here('./adapters/playwright/index.ts') },
      { find: /^burrow\/puppeteer$/, replacement: here('./adapters/puppeteer/index.ts') },
      { find: /^burrow$/, replacement: here('./src/index.ts') },
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
