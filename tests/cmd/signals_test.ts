/**
 * The one stop-signal module, driven by a fake signal source: no signal is
 * sent to the test process.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  PRESS_MS,
  SHUTDOWN_SIGNALS,
  shutdownSignal,
  type SignalSource,
} from "../../lib/cmd/signals.ts";
import { createLogger } from "../../lib/obs/log.ts";

/** Records listeners and delivers signals on demand. */
class FakeSignals implements SignalSource {
  listeners = new Map<Deno.Signal, Set<() => void>>();
  addSignalListener(signal: Deno.Signal, handler: () => void): void {
    if (!this.listeners.has(signal)) this.listeners.set(signal, new Set());
    this.listeners.get(signal)!.add(handler);
  }
  removeSignalListener(signal: Deno.Signal, handler: () => void): void {
    this.listeners.get(signal)?.delete(handler);
  }
  deliver(signal: Deno.Signal): void {
    for (const h of this.listeners.get(signal) ?? []) h();
  }
  count(): number {
    return [...this.listeners.values()].reduce((n, s) => n + s.size, 0);
  }
}

function logger(lines: string[]) {
  return createLogger({ write: (l) => lines.push(l) });
}

Deno.test("shutdownSignal aborts on the first stop signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT), naming it, and logs a second one", async () => {
  for (const sig of SHUTDOWN_SIGNALS) {
    const source = new FakeSignals();
    const lines: string[] = [];
    const s = shutdownSignal(logger(lines), source);
    assert.equal(s.signal.aborted, false);
    source.deliver(sig);
    assert.equal(s.signal.aborted, true);
    assert.equal((s.signal.reason as DOMException).name, "AbortError");
    assert.match((s.signal.reason as DOMException).message, new RegExp(sig));
    // One Ctrl-C arrives twice under `deno task`: the second is the same press.
    source.deliver(sig);
    if (sig === "SIGINT") {
      assert.equal(lines.length, 1, lines.join("\n"));
      await new Promise((r) => setTimeout(r, PRESS_MS + 20)); // a timer may fire a ms early
      source.deliver(sig);
    }
    assert.equal(lines.length, 2);
    assert.match(lines[0], /signal received; shutting down/);
    assert.match(lines[1], /signal received again; still finishing/);
    s.dispose();
    assert.equal(source.count(), 0, "dispose removes every listener");
  }
});
