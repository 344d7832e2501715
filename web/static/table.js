// VirtualTable renders only the rows in view, so a table of tens of
// thousands of objects costs the same to draw as one of fifty. Changes are
// marked dirty and drawn at most once per animation frame.
export class VirtualTable {
  constructor({ viewport, spacer, rows, rowHeight, render, onClick }) {
    Object.assign(this, { viewport, spacer, rowsEl: rows, rowHeight, render });
    this.items = new Map(); // key -> item
    this.order = null;      // sorted keys, rebuilt when membership changes
    this.changed = new Map(); // key -> time of last change, for the highlight
    this.frame = 0;
    this.maxDrawMs = 0; // longest draw so far
    viewport.addEventListener("scroll", () => this.schedule());
    new ResizeObserver(() => this.schedule()).observe(viewport);
    rows.addEventListener("click", (e) => {
      const row = e.target.closest(".row");
      if (row) onClick(this.items.get(row.dataset.key));
    });
  }
  get size() { return this.items.size; }
  // set adds or replaces an item; highlight marks it as changed.
  set(key, item, highlight) {
    if (!this.items.has(key)) this.order = null;
    this.items.set(key, item);
    if (highlight) this.changed.set(key, performance.now());
    this.schedule();
  }
  delete(key) {
    if (this.items.delete(key)) { this.order = null; this.changed.delete(key); this.schedule(); }
  }
  clear() { this.items.clear(); this.changed.clear(); this.order = null; this.schedule(); }
  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(() => { this.frame = 0; this.draw(); });
  }
  draw() {
    const start = performance.now();
    this.drawRows();
    this.maxDrawMs = Math.max(this.maxDrawMs, performance.now() - start);
  }
  drawRows() {
    if (!this.order) this.order = [...this.items.keys()].sort();
    const h = this.rowHeight;
    this.spacer.style.height = this.order.length * h + "px";
    const top = this.viewport.scrollTop;
    const first = Math.max(0, Math.floor(top / h) - 10);
    const last = Math.min(this.order.length, Math.ceil((top + this.viewport.clientHeight) / h) + 10);
    this.rowsEl.style.transform = `translateY(${first * h}px)`;
    const now = performance.now();
    const frag = document.createDocumentFragment();
    const old = new Map();
    for (const el of this.rowsEl.children) old.set(el.dataset.key, el);
    for (let i = first; i < last; i++) {
      const key = this.order[i];
      const item = this.items.get(key);
      let el = old.get(key);
      if (el && el._item === item) {
        old.delete(key);
      } else {
        el = this.render(item);
        el.dataset.key = key;
        el._item = item;
        const t = this.changed.get(key);
        if (t !== undefined && now - t < 1500) el.classList.add("changed");
      }
      frag.appendChild(el);
    }
    this.rowsEl.replaceChildren(frag);
    // Highlights older than the animation no longer matter.
    if (this.changed.size > 1000) for (const [k, t] of this.changed) if (now - t > 1500) this.changed.delete(k);
  }
}
