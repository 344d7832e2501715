// toYAML renders a JSON value as block-style YAML (enough for reading
// Kubernetes objects; strings that YAML would misread are quoted).
export function toYAML(v, indent = "") {
  return render(v, indent, scalar, scalar);
}

// toEditableYAML renders v for editing: as toYAML, but every string value
// is double-quoted (JSON's escapes are YAML's), and keys unless they are
// plain names, so that kube-apiserver's YAML reader, which follows YAML
// 1.1 (where 0x1F and 1_000 are numbers and on is true), reads back
// exactly the strings it was given, whatever they look like.
export function toEditableYAML(v) {
  return render(v, "", strictScalar, strictKey);
}

function render(v, indent, value, key) {
  if (Array.isArray(v)) {
    if (v.length === 0) return "[]";
    return v.map((x) => {
      const s = render(x, indent + "  ", value, key);
      return indent + "- " + (isBlock(x) ? s.trimStart() : s);
    }).join("\n");
  }
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v);
    if (keys.length === 0) return "{}";
    return keys.map((k) => {
      const x = v[k];
      const head = indent + key(k) + ":";
      if (isBlock(x)) return head + "\n" + render(x, Array.isArray(x) ? indent : indent + "  ", value, key);
      return head + " " + render(x, indent + "  ", value, key);
    }).join("\n");
  }
  return value(v);
}

function strictScalar(v) {
  return typeof v === "string" ? JSON.stringify(v) : scalar(v);
}

function strictKey(k) {
  return /^[A-Za-z_][\w.\/-]*$/.test(k) && !/^(y|n|yes|no|true|false|on|off|null)$/i.test(k) ? k : JSON.stringify(k);
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
