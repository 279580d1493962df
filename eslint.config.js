// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** @param {string[]} names @returns {Record<string, 'readonly'>} */
const readonly = (names) => Object.fromEntries(names.map((n) => [n, 'readonly']));

/**
 * Globals of the pages' scripts (they run in the viewer's browser). Listed here rather than
 * taken from the `globals` package, which is not a dependency: add a name when a page needs it.
 */
const BROWSER_GLOBALS = readonly([
  ...['window', 'document', 'location', 'navigator', 'console', 'performance', 'devicePixelRatio'],
  ...['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'queueMicrotask'],
  ...['requestAnimationFrame', 'cancelAnimationFrame', 'getComputedStyle', 'createImageBitmap'],
  ...['URL', 'URLSearchParams', 'WebSocket', 'fetch', 'Blob', 'File', 'FileReader', 'FormData'],
  ...['TextEncoder', 'TextDecoder', 'AbortController', 'atob', 'btoa', 'structuredClone'],
  ...['Event', 'CustomEvent', 'EventTarget', 'KeyboardEvent', 'MouseEvent', 'PointerEvent'],
  ...['HTMLElement', 'HTMLCanvasElement', 'ResizeObserver'],
]);

/** Globals of plain Node modules shipped in src/ (helpers run inside instances). */
const NODE_GLOBALS = readonly([
  ...['process', 'console', 'Buffer', 'URL', 'URLSearchParams', 'AbortController'],
  ...['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate'],
  ...['queueMicrotask', 'structuredClone', 'TextEncoder', 'TextDecoder', 'performance'],
]);

/** STYLE.md 9: the public surface is curated. */
const NO_EXPORT_ALL = {
  selector: 'ExportAllDeclaration',
  message: 'Curated public surface: no export * (STYLE.md 9).',
};

/**
 * STYLE.md 15: a deadline, a poll or a pause is written once, in src/internal/ (deadline.ts:
 * `raceDeadline`, `withDeadline`, `until`, `abortable`; serial.ts, backoff.ts, repeat.ts), where
 * its timer is cleared, unref'd and its late rejection handled. Elsewhere a hand-made one is
 * refused: `Promise.race` (a deadline race), and a `new Promise` whose executor arms a timer
 * (a sleep or a deadline). A plain pause is `setTimeout` of `node:timers/promises`.
 */
const HAND_MADE_TIMERS = [
  {
    selector: "CallExpression[callee.object.name='Promise'][callee.property.name='race']",
    message:
      'A deadline race is raceDeadline/withDeadline of src/internal/deadline.ts (STYLE.md 15).',
  },
  {
    selector:
      "NewExpression[callee.name='Promise'] > :function CallExpression[callee.name=/^(setTimeout|setInterval)$/]",
    message:
      'A sleep, poll or deadline made of new Promise and a timer: use src/internal/ (deadline.ts `until`, `withDeadline`; repeat.ts) or setTimeout of node:timers/promises (STYLE.md 15).',
  },
];

export default tseslint.config(
  {
    ignores: [
      ...['dist/**', 'node_modules/**', 'coverage/**', 'test-results/**', 'eslint.config.js'],
      // mutation testing (npm run mutation:security): its sandboxes, reports and plain-JS configs
      ...['.stryker-tmp/**', 'reports/**', 'stryker.config.mjs', 'stryker.vitest.config.mjs'],
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'no-restricted-syntax': ['error', NO_EXPORT_ALL, ...HAND_MADE_TIMERS],
    },
  },
  {
    // src/internal/ is where those mechanisms are written. Tests wait for real time on purpose
    // (a pause before asserting that nothing happened) and drive the global timers with
    // vi.useFakeTimers, which a promise of node:timers/promises does not follow.
    files: ['src/internal/**', 'test/**'],
    rules: { 'no-restricted-syntax': ['error', NO_EXPORT_ALL] },
  },
  {
    // The image's check is part of the image's definition (scripts/image-sum.sh): any change to
    // it makes CI build and run the whole image again (about 19 minutes). Its one hand-made pause
    // moves onto node:timers/promises with the next change that rebuilds the image anyway.
    files: ['scripts/image.ts'],
    rules: { 'no-restricted-syntax': ['error', NO_EXPORT_ALL] },
  },
  {
    // Plain JavaScript modules shipped in src/ as they are: outside the TypeScript project, so
    // no project service and no type-aware rules.
    files: ['src/**/*.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: { sourceType: 'module' },
  },
  {
    // Scripts of the pages the server serves: `<name>.page.mjs` beside `<name>.html`, inlined
    // into it by src/server/pages/pages.ts. They run in the viewer's browser.
    files: ['src/**/*.page.mjs'],
    languageOptions: { globals: BROWSER_GLOBALS },
  },
  {
    // Other plain modules run under Node (helpers started inside an instance).
    files: ['src/**/*.mjs'],
    ignores: ['src/**/*.page.mjs'],
    languageOptions: { globals: NODE_GLOBALS },
  },
);
