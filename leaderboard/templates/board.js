// membench web board: sortable tables, the index's filters, row filters, plots.
// Reads only what the page holds (data-* attributes, cell text, embedded JSON); writes text with
// textContent, never as HTML.
"use strict";

function cellKey(cell, numeric) {
  const text = cell ? cell.textContent.trim() : "";
  if (!numeric) return text.toLowerCase();
  const value = parseFloat(text);
  return Number.isNaN(value) ? null : value;
}

function sortTable(table, column, descending) {
  const header = table.tHead.rows[0].cells[column];
  const numeric = header.dataset.numeric === "1";
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = cellKey(a.cells[column], numeric);
    const y = cellKey(b.cells[column], numeric);
    if (x === y) return 0;
    if (x === null || x === "") return 1;  // empty and n/a last, whatever the direction
    if (y === null || y === "") return -1;
    const order = x < y ? -1 : 1;
    return descending ? -order : order;
  });
  rows.forEach((row) => body.appendChild(row));
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
  let shown = 0;
  const rows = Array.from(table.tBodies[0].rows);
  rows.forEach((row) => {
    const data = row.dataset;
    const visible = (!search || data.name.includes(search)) && (!kind || data.kind === kind)
      && (!task || data.tasks.split(" ").includes(task)) && (!sparsity || data.sparsity === sparsity)
      && (!run || data.run === run);
    row.hidden = !visible;
    if (visible) shown += 1;
  });
  table.querySelectorAll("[data-task]").forEach((cell) => {
    cell.hidden = Boolean(task) && cell.dataset.task !== task;
  });
  document.getElementById("shown").textContent = `${shown} of ${rows.length} models`;
}

function filterRows(input) {
  const table = document.getElementById(input.dataset.table);
  if (!table) return;
  const needle = input.value.trim().toLowerCase();
  Array.from(table.tBodies[0].rows).forEach((row) => {
    row.hidden = Boolean(needle) && !row.textContent.toLowerCase().includes(needle);
  });
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
