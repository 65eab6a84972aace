// The linter of `npm test`: ESLint 9 with typescript-eslint, flat config. Pure
// JavaScript packages from the npm registry: it installs the same everywhere `npm ci` runs (Biome's
// per-platform binaries are optional dependencies that this project's registry does not all serve,
// which made `npm ci` refuse the lock file on a clean clone).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', '.test-build/**', 'coverage/**', '.tap/**', 'node_modules/**', 'schema/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        setImmediate: 'readonly',
        performance: 'readonly',
        URL: 'readonly',
        fetch: 'readonly',
        AbortController: 'readonly',
        AbortSignal: 'readonly',
        TextDecoder: 'readonly',
        TextEncoder: 'readonly',
        SharedArrayBuffer: 'readonly',
        Atomics: 'readonly',
        structuredClone: 'readonly',
        queueMicrotask: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'prefer-const': 'error',
      // `!` after a check the compiler cannot follow (buffer indexes, maps filled just before).
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Deliberate: the JSON scanner and the contract check control characters in strings.
      'no-control-regex': 'off',
    },
  },
  {
    // Type-aware rules over src/ and test/: policies may return promises (a Redis rate limit), and
    // a promise nobody awaits or catches fails silently, or crashes the process on an unhandled
    // rejection; in a test it can also end the test before its assertions ran. test/ is read
    // through tsconfig.test.json, the program that type-checks it.
    files: ['src/**/*.ts', 'test/**/*.ts'],
    languageOptions: {
      parserOptions: { project: ['./tsconfig.test.json'], tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // tap queues a subtest and its parent waits for it: the promise `t.test` returns is
          // for the rare test that awaits a sibling, not a promise left unhandled.
          allowForKnownSafeCalls: [{ from: 'package', package: '@tapjs/test', name: ['test', 'skip', 'todo', 'only'] }],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    // The console's page (console/*.js): plain browser modules, no bundler.
    files: ['console/**/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: {
        window: 'readonly',
        document: 'readonly',
        sessionStorage: 'readonly',
        CSS: 'readonly',
        Intl: 'readonly',
      },
    },
  },
  {
    // A function longer than a screen hides its branches.
    files: ['src/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }] },
  },
);
