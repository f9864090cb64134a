// The Worker's entry (wrangler.toml `main`): the Rust worker built by worker-build
// (build/index.js and its wasm), after one change to the global scope (microtasks.mjs), with
// the Mini App's page files answered here before the wasm is called (miniapp.mjs: they stay
// out of the wasm's size budget).
import "./microtasks.mjs";
import Worker from "../../build/index.js";
import { miniAppFile } from "./miniapp.mjs";
export * from "../../build/index.js";

export default class Entry extends Worker {
  fetch(request) {
    return miniAppFile(request) ?? super.fetch(request);
  }
}
