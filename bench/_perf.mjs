import fs from "node:fs";
import { spawn } from "node:child_process";
import { startStack, groupText, sleep } from "../tests/support/stack.js";
const s = await startStack({ vars: {} });
const kids = [];
for (const d of fs.readdirSync("/proc")) { if (!/^\d+$/.test(d)) continue; try { const st = fs.readFileSync(`/proc/${d}/stat`, "utf8"); const ppid = Number(st.slice(st.lastIndexOf(")") + 2).split(" ")[1]); if (ppid === process.pid && st.includes("(workerd")) kids.push(d); } catch {} }
console.log("kids", kids);
for (let i = 0; i < 30; i++) await s.webhook(groupText(-100777, 5 + (i % 3), `warm ${i}`));
const pid = kids.map((k) => [k, Number(fs.readFileSync(`/proc/${k}/stat`, "utf8").split(") ")[1].split(" ")[11])]).sort((a, b) => b[1] - a[1])[0][0];
console.log("pid", pid);
const perf = spawn("perf", ["record", "-F", "4999", "-p", pid, "-o", "/tmp/perf.cpu.data"], { stdio: "inherit" });
await sleep(500);
for (let i = 0; i < 200; i++) await s.webhook(groupText(-100777, 5 + (i % 3), `chatter ${i}`));
perf.kill("SIGINT");
await new Promise((r) => perf.on("exit", r));
await s.close();
