// WindowTable shows a live window (a LiveWindow of kubegate.js) as a
// table that scrolls through every matching row while the page holds
// only the window's: a spacer as tall as count rows gives the scroll bar
// its length and position, only the rows in view are drawn, and as the
// view moves the table asks for the window around it (onRange), never
// for the whole list. Rows in view that the window does not hold yet
// (a fast scroll) are drawn as placeholders until it does.
//
// Drawing happens at most once per animation frame (schedule), and a
// range is asked for at most once per draw.
import { MAX_WINDOW_LIMIT, cellText, objectKey } from "./kubegate.js";

// Browsers cap an element's height (Chrome at about 33.5 million pixels):
// a list taller than this is scaled, one pixel of scroll standing for
// more than one pixel of rows.
const MAX_HEIGHT = 8_000_000;
// How long a changed row is highlighted, in ms (the CSS animation's length).
const FLASH_MS = 1500;
// SLOW_DRAW_MS: a draw that takes longer is counted in slowDraws (a long
// task: the page did nothing else meanwhile).
const SLOW_DRAW_MS = 500;

export class WindowTable {
  // head, viewport, spacer, rows: the elements. rowHeight in px.
  // onRange({offset, limit}) asks for the window; onSort(key) is a header
  // click; onClick(row) a row click; onDraw({rows, placeholders}) follows
  // every draw.
  constructor({ head, viewport, spacer, rows, rowHeight, onRange, onSort, onClick, onDraw }) {
    Object.assign(this, { head, viewport, spacer, rowsEl: rows, rowHeight, onRange, onSort, onDraw });
    this.win = null; // the LiveWindow shown
    this.columns = []; // {label, sortKey, title, get(row) → cell, relative, name}
    this.requested = null; // the range last asked for: {offset, limit}
    this.flashed = new Map(); // key → time of its last change
    this.frame = 0;
    this.maxDrawMs = 0; // the longest draw so far
    this.slowDraws = 0; // draws over SLOW_DRAW_MS
    this.draws = 0;
    viewport.addEventListener("scroll", () => {
      head.scrollLeft = viewport.scrollLeft;
      this.schedule();
    });
    new ResizeObserver(() => this.schedule()).observe(viewport);
    rows.addEventListener("click", (e) => {
      const el = e.target.closest(".row");
      if (el && el._row) onClick(el._row);
    });
    head.addEventListener("click", (e) => {
      const el = e.target.closest("[data-sort]");
      if (el) this.onSort(el.dataset.sort);
    });
    head.addEventListener("keydown", (e) => {
      const el = e.target.closest("[data-sort]");
      if (el && (e.key === "Enter" || e.key === " ")) {
        e.preventDefault();
        this.onSort(el.dataset.sort);
      }
    });
  }

  // visibleRows is how many rows the viewport shows, plus one partly shown.
  visibleRows() {
    return Math.ceil(Math.max(1, this.viewport.clientHeight) / this.rowHeight) + 1;
  }

  // rangeAt is the window to hold when the view's first row is first:
  // about a screen of rows above and below the view. The limit is
  // rounded up to a multiple of 20 so that small changes of the view's
  // height do not ask for another.
  rangeAt(first) {
    const visible = this.visibleRows();
    const limit = Math.min(MAX_WINDOW_LIMIT, Math.ceil((3 * visible) / 20) * 20);
    return { offset: Math.max(0, first - Math.floor((limit - visible) / 2)), limit };
  }

  // show starts showing win (or nothing), from the top; range is the
  // range win was subscribed with.
  show(win, range) {
    this.win = win;
    this.requested = range;
    this.flashed.clear();
    this.viewport.scrollTop = 0;
    this.rowsEl.replaceChildren();
    this.schedule();
  }

  // setColumns sets the columns and marks the one sort and order name.
  setColumns(columns, sort, order) {
    this.columns = columns;
    const tmpl = columns.map((c) => (c.name ? "minmax(12rem, 3fr)" : c.sortKey === "metadata.namespace" ? "minmax(8rem, 1.5fr)" : "minmax(5rem, 1fr)")).join(" ");
    this.head.parentElement.style.setProperty("--cols", tmpl);
    const cells = columns.map((c) => {
      const s = document.createElement("span");
      s.textContent = c.label;
      s.dataset.sort = c.sortKey;
      s.tabIndex = 0;
      s.setAttribute("role", "columnheader");
      if (c.title) s.title = c.title;
      if (sortMatches(c, sort)) {
        s.setAttribute("aria-sort", order === "desc" ? "descending" : "ascending");
        s.classList.add("sorted");
      }
      return s;
    });
    this.head.replaceChildren(...cells);
    this.rowsEl.replaceChildren();
    this.schedule();
  }

  // flash highlights the row of key when it is next drawn.
  flash(key) {
    this.flashed.set(key, performance.now());
    this.schedule();
  }

  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  // tick rewrites the relative cells in view: ages move on while nothing
  // is sent.
  tick(now = Date.now()) {
    for (const el of this.rowsEl.querySelectorAll(".rel")) el.textContent = cellText(el._cell, now);
  }

  draw() {
    const start = performance.now();
    const stats = this.drawRows();
    const ms = performance.now() - start;
    this.maxDrawMs = Math.max(this.maxDrawMs, ms);
    if (ms > SLOW_DRAW_MS) this.slowDraws++;
    this.draws++;
    this.onDraw?.(stats);
  }

  drawRows() {
    const win = this.win;
    const count = win ? win.count : 0;
    const h = this.rowHeight;
    const height = Math.min(count * h, MAX_HEIGHT);
    this.spacer.style.height = height + "px";
    const viewH = Math.max(1, this.viewport.clientHeight);
    const scrollTop = this.viewport.scrollTop;
    // top is the (fractional) index of the row at the top of the view.
    let top = scrollTop / h;
    if (count * h > MAX_HEIGHT) {
      const maxScroll = height - viewH;
      top = maxScroll > 0 ? (Math.min(scrollTop, maxScroll) / maxScroll) * Math.max(0, count - viewH / h) : 0;
    }
    const first = Math.min(Math.floor(top), Math.max(0, count - 1));
    const last = Math.min(count, first + this.visibleRows());
    this.rowsEl.style.transform = `translateY(${Math.max(0, scrollTop - (top - first) * h)}px)`;

    const old = new Map();
    for (const el of this.rowsEl.children) if (el._row) old.set(el._row, el);
    const now = performance.now();
    const clock = Date.now();
    const frag = document.createDocumentFragment();
    let rows = 0;
    let placeholders = 0;
    for (let i = first; i < last; i++) {
      const row = win && win.rows[i - win.offset];
      let el;
      if (!row) {
        el = document.createElement("div");
        el.className = "row placeholder";
        placeholders++;
      } else {
        rows++;
        el = old.get(row);
        if (el) {
          old.delete(row);
        } else {
          el = this.renderRow(row, clock);
          const t = this.flashed.get(el.dataset.key);
          if (t !== undefined && now - t < FLASH_MS) el.classList.add("changed");
        }
      }
      frag.appendChild(el);
    }
    this.rowsEl.replaceChildren(frag);
    if (this.flashed.size > 256) for (const [k, t] of this.flashed) if (now - t > FLASH_MS) this.flashed.delete(k);
    if (win && win.state !== "ended") this.askFor(first, last, count);
    return { rows, placeholders, first, last };
  }

  // askFor moves the window when the view [first, last) comes within half
  // a margin of the window's edge (where there are rows beyond it), or
  // when the view's height asks for another limit.
  askFor(first, last, count) {
    const want = this.rangeAt(first);
    const req = this.requested;
    const margin = Math.floor((want.limit - (last - first)) / 2);
    if (req) {
      const lo = req.offset > 0 ? req.offset + margin / 2 : 0;
      const end = req.offset + req.limit;
      const hi = end < count ? end - margin / 2 : Infinity;
      if (want.limit === req.limit && first >= lo && last <= hi) return;
      if (want.offset === req.offset && want.limit === req.limit) return;
    }
    this.requested = want;
    this.onRange(want);
  }

  renderRow(row, now) {
    const el = document.createElement("div");
    el.className = "row";
    el.dataset.key = objectKey(row);
    el._row = row;
    for (const c of this.columns) {
      const cell = c.get(row);
      const s = document.createElement("span");
      s.textContent = cellText(cell, now);
      if (cell !== null && typeof cell === "object") {
        s.className = "rel";
        s._cell = cell;
      }
      if (c.name) s.title = s.textContent;
      el.appendChild(s);
    }
    if (row.conditions?.some((c) => c.type === "Completed" && c.status === "True")) el.classList.add("completed");
    return el;
  }
}

// sortMatches reports whether column c is what the window is sorted by
// (the ack's sort: a column name, or a metadata key).
function sortMatches(c, sort) {
  if (!sort) return false;
  const s = sort.replace(/^\./, "").toLowerCase();
  return c.sortKey.toLowerCase() === s || (c.name && s === "metadata.name");
}
