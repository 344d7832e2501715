// toYAML renders a JSON value as block-style YAML (enough for reading
// Kubernetes objects; strings that YAML would misread are quoted).
export function toYAML(v, indent = "") {
  if (Array.isArray(v)) {
    if (v.length === 0) return "[]";
    return v.map((x) => {
      const s = toYAML(x, indent + "  ");
      return indent + "- " + (isBlock(x) ? s.trimStart() : s);
    }).join("\n");
  }
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v);
    if (keys.length === 0) return "{}";
    return keys.map((k) => {
      const x = v[k];
      const key = indent + scalar(k) + ":";
      if (isBlock(x)) return key + "\n" + toYAML(x, Array.isArray(x) ? indent : indent + "  ");
      return key + " " + toYAML(x, indent + "  ");
    }).join("\n");
  }
  return scalar(v);
}

function isBlock(x) {
  return x !== null && typeof x === "object" && (Array.isArray(x) ? x.length > 0 : Object.keys(x).length > 0);
}

function scalar(v) {
  if (v === null) return "null";
  if (typeof v !== "string") return String(v);
  if (v === "" || /^[\s\-?:,[\]{}#&*!|>'"%@`~]|[:#]\s|\s$|\n|^(true|false|yes|no|on|off|null|~|[-+]?[0-9.]+(e[-+]?[0-9]+)?)$/i.test(v)) {
    return JSON.stringify(v);
  }
  return v;
}
