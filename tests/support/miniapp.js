// Mini App init data for the tests: signed on node:crypto (tools/miniapp-launch.js), an
// implementation independent of the worker's Rust check.
export { signInitData, initDataFor, launchUrl } from "../../tools/miniapp-launch.js";
