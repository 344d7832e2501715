// kubegate.d.ts is written by hand: check that it declares what the module
// exports, no more and no less, and that the classes have the members it
// declares.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import * as kubegate from "../kubegate.js";

const dts = readFileSync(new URL("../kubegate.d.ts", import.meta.url), "utf8");

test("every value the declarations name is exported, and every export is declared", () => {
  const declared = [...dts.matchAll(/^export declare (?:const|function|class) (\w+)/gm)].map((m) => m[1]).sort();
  assert.deepEqual(declared, Object.keys(kubegate).sort());
});

// members returns the members declared in the body of class name.
function members(name) {
  const body = new RegExp(`^export declare class ${name}(?:<[^\\n]*>)? \\{\\n([\\s\\S]*?)^\\}`, "m").exec(dts);
  assert.ok(body, `class ${name} not found in kubegate.d.ts`);
  const out = [];
  for (const line of body[1].split("\n")) {
    const m = /^ {2}(?:readonly )?(\w+)(\??)(\(|<|:)/.exec(line);
    if (m && m[1] !== "constructor") out.push({ name: m[1], method: m[3] !== ":" });
  }
  return out;
}

class StubSocket {
  constructor() {
    this.readyState = 0;
  }
  close() {}
}

test("the classes have the members declared", () => {
  const client = new kubegate.KubegateClient("ws://gw.example/ws", { WebSocket: StubSocket });
  const sub = client.subscribe({ resource: "pods" });
  const win = client.window({ resource: "pods", limit: 10 });
  for (const [name, instance] of [["KubegateClient", client], ["Subscription", sub], ["LiveWindow", win]]) {
    const declared = members(name);
    assert.ok(declared.length > 3, `no members parsed for ${name}`);
    for (const m of declared) {
      assert.ok(m.name in instance, `${name}.${m.name} is declared but missing`);
      assert.equal(typeof instance[m.name] === "function", m.method, `${name}.${m.name}: method and property disagree`);
    }
    // Public own fields and prototype methods are all declared.
    const names = new Set(declared.map((m) => m.name));
    const proto = Object.getPrototypeOf(instance);
    for (const key of [...Object.keys(instance), ...Object.getOwnPropertyNames(proto)]) {
      if (key !== "constructor") assert.ok(names.has(key), `${name}.${key} is not declared`);
    }
  }
});
