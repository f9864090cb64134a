// Loaded before the worker's module (src/entry/index.mjs imports it first).
//
// The Rust futures (wasm-bindgen's queue) schedule every wake-up with the global
// queueMicrotask when there is one. workerd's queueMicrotask wraps each callback it is given
// in a new native function, and a turn schedules dozens of wake-ups: in a profile of a short
// turn that wrapping was about a tenth of the Worker's own CPU (bench/cpu.mjs, CPU_PROFILE).
// A reaction on a settled promise is a microtask too, the same point in the event loop, with
// no wrapper. Only where an exception thrown by a callback is reported differs (an unhandled
// rejection rather than an uncaught error), and the queue's callback catches its own.
const settled = Promise.resolve();
globalThis.queueMicrotask = function queueMicrotask(callback) {
  if (typeof callback !== "function") throw new TypeError("queueMicrotask: the callback is not a function");
  settled.then(() => callback());
};
