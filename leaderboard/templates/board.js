// membench web board: sortable tables, the index's filters, row filters, plots.
// Reads only what the page holds (data-* attributes, cell text, embedded JSON); writes text with
// textContent, never as HTML. A table may hold its rows in groups, a tbody each (the real models,
// the reference controls), headed by rows of class `fixed`: sorting and filtering act on the other
// rows, each group within itself.
"use strict";

function dataRows(body) {
  return Array.from(body.rows).filter((row) => !row.classList.contains("fixed"));
}

function cellKey(cell, numeric) {
  const text = cell ? cell.textContent.trim() : "";
  if (!numeric) return text.toLowerCase();
  const value = parseFloat(text);
  return Number.isNaN(value) ? null : value;
}

function sortTable(table, column, descending) {
  const header = table.tHead.rows[0].cells[column];
  const numeric = header.dataset.numeric === "1";
  Array.from(table.tBodies).forEach((body) => {
    const rows = dataRows(body);
    rows.sort((a, b) => {
      const x = cellKey(a.cells[column], numeric);
      const y = cellKey(b.cells[column], numeric);
      if (x === y) return 0;
      if (x === null || x === "") return 1;  // empty and n/a last, whatever the direction
      if (y === null || y === "") return -1;
      const order = x < y ? -1 : 1;
      return descending ? -order : order;
    });
    rows.forEach((row) => body.appendChild(row));  // after the group's heading, which stays first
  });
  Array.from(table.tHead.rows[0].cells).forEach((th) => th.removeAttribute("aria-sort"));
  header.setAttribute("aria-sort", descending ? "descending" : "ascending");
}

function makeSortable(table) {
  Array.from(table.tHead.rows[0].cells).forEach((th, column) => {
    const button = th.querySelector("button");
    if (!button) return;
    button.addEventListener("click", () => {
      const descending = th.getAttribute("aria-sort") === "ascending";
      sortTable(table, column, descending);
    });
  });
}

function applyFilters() {
  const table = document.getElementById("overview");
  if (!table) return;
  const value = (id) => document.getElementById(id).value;
  const search = value("search").trim().toLowerCase();
  const kind = value("filter-kind");
  const task = value("filter-task");
  const sparsity = value("filter-sparsity");
  const run = value("filter-run");
  const group = value("filter-group");
  let shown = 0;
  let total = 0;
  Array.from(table.tBodies).forEach((body) => {
    const rows = dataRows(body);
    let shownHere = 0;
    rows.forEach((row) => {
      const data = row.dataset;
      const visible = (!search || data.name.includes(search)) && (!kind || data.kind === kind)
        && (!task || data.tasks.split(" ").includes(task)) && (!sparsity || data.sparsity === sparsity)
        && (!run || data.run === run) && (!group || data.group === group);
      row.hidden = !visible;
      if (visible) shownHere += 1;
    });
    shown += shownHere;
    total += rows.length;
    body.hidden = Boolean(group) && body.dataset.group !== group;
    const count = body.querySelector(".group-count");
    if (count) {
      const noun = rows.length === 1 ? "model" : "models";
      count.textContent = shownHere === rows.length ? `${rows.length} ${noun}` : `${shownHere} of ${rows.length} ${noun}`;
    }
  });
  table.querySelectorAll("[data-task]").forEach((cell) => {
    cell.hidden = Boolean(task) && cell.dataset.task !== task;
  });
  // a group's heading spans the columns shown
  const columns = Array.from(table.tHead.rows[0].cells).filter((cell) => !cell.hidden).length;
  table.querySelectorAll("tr.fixed > [colspan]").forEach((cell) => { cell.colSpan = columns; });
  document.getElementById("shown").textContent = `${shown} of ${total} models`;
}

function filterRows(input) {
  const table = document.getElementById(input.dataset.table);
  if (!table) return;
  const needle = input.value.trim().toLowerCase();
  Array.from(table.tBodies).forEach((body) => dataRows(body).forEach((row) => {
    row.hidden = Boolean(needle) && !row.textContent.toLowerCase().includes(needle);
  }));
}

function drawPlots() {
  document.querySelectorAll("div.plot").forEach((div) => {
    const figure = JSON.parse(document.getElementById(div.dataset.figure).textContent);
    Plotly.newPlot(div, figure.data, figure.layout, {responsive: true, displaylogo: false});
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("table.sortable").forEach(makeSortable);
  const filters = document.getElementById("filters");
  if (filters) {
    filters.addEventListener("input", applyFilters);
    filters.addEventListener("change", applyFilters);
    applyFilters();
  }
  document.querySelectorAll("input.row-filter").forEach((input) => {
    input.addEventListener("input", () => filterRows(input));
  });
  if (typeof Plotly !== "undefined") drawPlots();
});
