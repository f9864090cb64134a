// The Worker's entry (wrangler.toml `main`): the Rust worker built by worker-build
// (build/index.js and its wasm), after one change to the global scope (microtasks.mjs).
import "./microtasks.mjs";
export * from "../../build/index.js";
export { default } from "../../build/index.js";
