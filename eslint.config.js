// The linter of `npm test`: ESLint 9 with typescript-eslint, flat config. Pure
// JavaScript packages from the npm registry: it installs the same everywhere `npm ci` runs (Biome's
// per-platform binaries are optional dependencies that this project's registry does not all serve,
// which made `npm ci` refuse the lock file on a clean clone).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'coverage/**', '.tap/**', 'node_modules/**', 'schema/**'] },
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
    // Type-aware rules over src/: policies may return promises (a Redis rate limit), and a promise
    // nobody awaits or catches fails silently, or crashes the process on an unhandled rejection.
    files: ['src/**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      // A function longer than a screen hides its branches. A warning over src/ while the last
      // long ones (the CLI's serve, the supervisor, the Fastify plugin, the cluster's primary, the
      // JSON scanner's skipValue) are split; an error where the code is already short.
      'max-lines-per-function': ['warn', { max: 80 }],
    },
  },
  {
    files: ['src/core/exchange.ts', 'src/core/forward/**/*.ts', 'src/core/deadlines.ts', 'src/core/breaker.ts', 'src/core/upstream.ts', 'src/core/record.ts', 'src/core/chain.ts', 'src/core/policy.ts', 'src/upstreams/builtin.ts', 'src/gateway.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80 }] },
  },
);
