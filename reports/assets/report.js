// tune report, main script: makes the data tables sortable, filterable and
// paged, and draws the charts from the JSON specs in #report-data with
// Chart.js. Data from the database only ever reaches the page as text
// (textContent) or canvas drawing, never as markup.
(function () {
  'use strict';

  var PAGE_ROWS = 100;
  var COLOURS = ['#0072b2', '#e69f00', '#009e73', '#cc79a7', '#56b4e9', '#d55e00', '#8c6d31', '#000000', '#999999'];
  var FRONT_COLOURS = ['#222222', '#b8002e', '#005a32'];
  var LIMIT_COLOURS = ['#c0392b', '#7d3c98'];
  var MARKERS = ['circle', 'rect', 'triangle', 'rectRot'];

  // ------------------------------------------------------------------ tables

  function element(tag, className, text) {
    var e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function numberKey(text) {
    var v = parseFloat(text);
    return isNaN(v) ? null : v;
  }

  // A row is either a <tr> already in the page or a row of page data (cells
  // as text or [text, class, sort, title]) whose <tr> is made the first time it is shown.
  function Row(element, cells) {
    this.element = element;
    this.cells = cells;
  }

  Row.prototype.text = function (column) {
    if (!this.cells) return this.element.cells[column] ? this.element.cells[column].textContent : '';
    var cell = this.cells[column];
    return Array.isArray(cell) ? cell[0] : (cell === undefined ? '' : cell);
  };

  // What a numeric column sorts by: the cell's plain number ("2621440" for "2.50 MiB"), else its text.
  Row.prototype.sortText = function (column) {
    if (!this.cells) {
      var td = this.element.cells[column];
      return td && td.hasAttribute('data-sort') ? td.getAttribute('data-sort') : this.text(column);
    }
    var cell = this.cells[column];
    return Array.isArray(cell) && cell[2] ? cell[2] : this.text(column);
  };

  Row.prototype.allText = function () {
    if (!this.cells) return this.element.textContent;
    var parts = [];
    for (var c = 0; c < this.cells.length; c += 1) parts.push(this.text(c));
    return parts.join(' ');
  };

  Row.prototype.tr = function () {
    if (!this.element) {
      var tr = document.createElement('tr');
      this.cells.forEach(function (cell) {
        var td = document.createElement('td');
        if (Array.isArray(cell)) {
          td.textContent = cell[0];
          if (cell[1]) td.className = cell[1];
          if (cell[2]) td.setAttribute('data-sort', cell[2]);
          if (cell[3]) td.title = cell[3];
        } else {
          td.textContent = cell;
        }
        tr.appendChild(td);
      });
      this.element = tr;
    }
    return this.element;
  };

  function DataTable(table, rows) {
    this.table = table;
    this.body = table.tBodies[0];
    this.rows = rows;
    this.view = this.rows;
    this.heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    this.keys = [];        // per column, computed on the first sort by it
    this.texts = null;     // lower-case row texts, computed on the first filter
    this.page = 0;
    this.paged = table.classList.contains('interactive') && this.rows.length > PAGE_ROWS;
    this.sortColumn = -1;
    this.ascending = true;
    this.addSortButtons();
    if (table.classList.contains('interactive')) this.addControls();
    // A shortened cell (a trial's reason) shows its whole text when clicked, and folds back on a second click.
    this.body.addEventListener('click', function (event) {
      var td = event.target.closest ? event.target.closest('td.reason') : null;
      if (td) td.classList.toggle('open');
    });
    this.render();
  }

  DataTable.fromPage = function (table) {
    var rows = Array.prototype.slice.call(table.tBodies[0].rows).map(function (tr) { return new Row(tr, null); });
    return new DataTable(table, rows);
  };

  // A paged table from the page data, put where its <noscript> copy is.
  DataTable.fromData = function (holder, spec) {
    var wrap = element('div', 'table-wrap');
    var table = element('table', 'data interactive');
    table.id = holder.getAttribute('data-table');  // its <noscript> copy is text while scripts run: no duplicate
    var head = table.createTHead().insertRow();
    spec.columns.forEach(function (c) {
      var th = element('th', '', c.title);
      th.setAttribute('data-type', c.num ? 'num' : 'text');
      if (c.help) th.title = c.help;
      head.appendChild(th);
    });
    table.appendChild(document.createElement('tbody'));
    wrap.appendChild(table);
    holder.appendChild(wrap);
    return new DataTable(table, spec.rows.map(function (cells) { return new Row(null, cells); }));
  };

  DataTable.prototype.addSortButtons = function () {
    var self = this;
    this.heads.forEach(function (th, column) {
      var button = element('button', 'sort', th.textContent);
      button.type = 'button';
      button.title = (th.title ? th.title + '. ' : '') + 'Sort by this column';
      button.addEventListener('click', function () { self.sortBy(column); });
      th.textContent = '';
      th.appendChild(button);
    });
  };

  DataTable.prototype.addControls = function () {
    var self = this;
    var bar = element('div', 'table-controls');
    this.filter = element('input', 'filter');
    this.filter.type = 'search';
    this.filter.placeholder = 'filter: words that must all appear, e.g. "adamw oom"';
    this.filter.setAttribute('aria-label', 'filter rows');
    this.count = element('span', 'count');
    this.prev = element('button', 'page', 'previous');
    this.next = element('button', 'page', 'next');
    this.pageText = element('span', 'page-text');
    var timer = null;
    this.filter.addEventListener('input', function () {
      clearTimeout(timer);
      timer = setTimeout(function () { self.applyFilter(self.filter.value); }, 120);
    });
    this.prev.addEventListener('click', function () { self.page -= 1; self.render(); });
    this.next.addEventListener('click', function () { self.page += 1; self.render(); });
    bar.appendChild(this.filter);
    bar.appendChild(this.count);
    if (this.paged) {
      bar.appendChild(this.prev);
      bar.appendChild(this.pageText);
      bar.appendChild(this.next);
    }
    var wrap = this.table.parentNode;
    wrap.parentNode.insertBefore(bar, wrap);
  };

  DataTable.prototype.columnKeys = function (column) {
    if (!this.keys[column]) {
      var numeric = this.heads[column].getAttribute('data-type') === 'num';
      this.keys[column] = this.rows.map(function (row) {
        return numeric ? numberKey(row.sortText(column)) : row.text(column).toLowerCase();
      });
    }
    return this.keys[column];
  };

  DataTable.prototype.sortBy = function (column) {
    this.ascending = this.sortColumn === column ? !this.ascending : true;
    this.sortColumn = column;
    var keys = this.columnKeys(column);
    var order = this.rows.map(function (row, i) { return i; });
    var sign = this.ascending ? 1 : -1;
    order.sort(function (a, b) {
      var x = keys[a], y = keys[b];
      if (x === y) return a - b;
      if (x === null || x === '') return 1;   // empty cells last either way
      if (y === null || y === '') return -1;
      return (x < y ? -1 : 1) * sign;
    });
    var rows = this.rows;
    this.rows = order.map(function (i) { return rows[i]; });
    this.keys = this.keys.map(function (k) { return k && order.map(function (i) { return k[i]; }); });
    if (this.texts) {
      var texts = this.texts;
      this.texts = order.map(function (i) { return texts[i]; });
    }
    var self = this;
    this.heads.forEach(function (th, c) {
      th.setAttribute('aria-sort', c === column ? (self.ascending ? 'ascending' : 'descending') : 'none');
    });
    this.applyFilter(this.filter ? this.filter.value : '');
  };

  DataTable.prototype.applyFilter = function (query) {
    var terms = query.toLowerCase().split(/\s+/).filter(Boolean);
    if (terms.length === 0) {
      this.view = this.rows;
    } else {
      if (!this.texts) this.texts = this.rows.map(function (row) { return row.allText().toLowerCase(); });
      var texts = this.texts;
      this.view = this.rows.filter(function (row, i) {
        return terms.every(function (t) { return texts[i].indexOf(t) !== -1; });
      });
    }
    this.page = 0;
    this.render();
  };

  DataTable.prototype.render = function () {
    var pages = Math.max(1, Math.ceil(this.view.length / PAGE_ROWS));
    this.page = Math.min(Math.max(this.page, 0), pages - 1);
    var shown = this.paged ? this.view.slice(this.page * PAGE_ROWS, (this.page + 1) * PAGE_ROWS) : this.view;
    var fragment = document.createDocumentFragment();
    shown.forEach(function (row) { fragment.appendChild(row.tr()); });
    this.body.textContent = '';
    this.body.appendChild(fragment);
    if (this.count) this.count.textContent = this.view.length + ' of ' + this.rows.length + ' rows';
    if (this.paged) {
      this.pageText.textContent = 'page ' + (this.page + 1) + ' of ' + pages;
      this.prev.disabled = this.page === 0;
      this.next.disabled = this.page + 1 >= pages;
    }
  };

  // ------------------------------------------------------------------ charts

  function alpha(colour, a) {
    var n = parseInt(colour.slice(1), 16);
    return 'rgba(' + (n >> 16) + ',' + ((n >> 8) & 255) + ',' + (n & 255) + ',' + a + ')';
  }

  function axis(title, extra) {
    var a = { type: 'linear', title: { display: true, text: title }, beginAtZero: true };
    Object.keys(extra || {}).forEach(function (k) { a[k] = extra[k]; });
    return a;
  }

  function tooltipLines(context) {
    return context.raw && context.raw.t ? context.raw.t : context.dataset.label;
  }

  function baseOptions(scales) {
    return {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      parsing: true,
      scales: scales,
      plugins: { tooltip: { callbacks: { label: tooltipLines } }, legend: { position: 'bottom' } }
    };
  }

  function paretoChart(spec) {
    var datasets = [];
    var maxY = 0;
    spec.groups.forEach(function (g, i) {
      var colour = COLOURS[i % COLOURS.length];
      g.points.forEach(function (p) { maxY = Math.max(maxY, p.y); });
      datasets.push({
        type: 'scatter', label: g.label, data: g.points, order: 2,
        backgroundColor: alpha(colour, 0.55), borderColor: colour, pointRadius: 4, pointHoverRadius: 6,
        pointStyle: function (c) { return MARKERS[(c.raw && c.raw.z) % MARKERS.length] || 'circle'; }
      });
    });
    spec.fronts.forEach(function (f, i) {
      var colour = FRONT_COLOURS[i % FRONT_COLOURS.length];
      datasets.push({
        type: 'line', label: f.label, data: f.points, order: 1, borderColor: colour, backgroundColor: colour,
        borderWidth: 2, pointRadius: 3, tension: 0, fill: false,
        pointStyle: function (c) { return MARKERS[(c.raw && c.raw.z) % MARKERS.length] || 'circle'; }
      });
    });
    spec.limits.forEach(function (limit, i) {
      if (!(limit.x > 0)) return;
      datasets.push({
        type: 'line', label: limit.label, order: 0, borderColor: LIMIT_COLOURS[i % LIMIT_COLOURS.length],
        borderDash: [6, 4], borderWidth: 1.5, pointRadius: 0, fill: false,
        data: [{ x: limit.x, y: 0 }, { x: limit.x, y: maxY * 1.05 || 1 }]
      });
    });
    return { type: 'scatter', data: { datasets: datasets },
             options: baseOptions({ x: axis('peak memory per GPU (' + spec.x_unit + ')', { beginAtZero: false }),
                                    y: axis('tokens/s') }) };
  }

  function versusChart(spec) {
    var max = 0;
    spec.points.forEach(function (p) { max = Math.max(max, p.x, p.y); });
    return {
      type: 'scatter',
      data: { datasets: [
        { label: 'trials', data: spec.points, backgroundColor: alpha(COLOURS[0], 0.5), borderColor: COLOURS[0], pointRadius: 3 },
        { type: 'line', label: 'exact (estimated = measured)', data: [{ x: 0, y: 0 }, { x: max * 1.05, y: max * 1.05 }],
          borderColor: '#888888', borderDash: [4, 4], pointRadius: 0, borderWidth: 1 }
      ] },
      options: baseOptions({ x: axis(spec.x_label), y: axis(spec.y_label) })
    };
  }

  function histogramChart(spec) {
    return {
      type: 'bar',
      data: { labels: spec.labels, datasets: spec.series.map(function (s, i) {
        return { label: s.label, data: s.values, backgroundColor: alpha(COLOURS[i], 0.7), borderColor: COLOURS[i], borderWidth: 1 };
      }) },
      options: baseOptions({ x: { title: { display: true, text: spec.x_label } }, y: axis('trials', { ticks: { precision: 0 } }) })
    };
  }

  function breakdownChart(spec) {
    var datasets = [];
    spec.series.forEach(function (s, i) {
      var colour = COLOURS[i % COLOURS.length];
      datasets.push({ label: s.component + ' (estimated)', data: s.estimated, stack: 'estimated',
                      backgroundColor: alpha(colour, 0.35), borderColor: colour, borderWidth: 1 });
      datasets.push({ label: s.component, data: s.measured, stack: 'measured', backgroundColor: alpha(colour, 0.85),
                      borderColor: colour, borderWidth: 1 });
    });
    var options = baseOptions({ x: { stacked: true }, y: axis(spec.unit + ' per GPU', { stacked: true }) });
    options.plugins.tooltip.callbacks.label = function (c) { return c.dataset.label + ': ' + c.parsed.y.toFixed(2) + ' ' + spec.unit; };
    options.plugins.legend.labels = { filter: function (item) { return !/\(estimated\)$/.test(item.text); } };
    return { type: 'bar', data: { labels: spec.labels, datasets: datasets }, options: options };
  }

  function linesChart(spec) {
    return {
      type: 'line',
      data: { labels: spec.x, datasets: spec.series.map(function (s, i) {
        var colour = COLOURS[i % COLOURS.length];
        return { label: s.label, data: s.values, borderColor: colour, backgroundColor: colour, spanGaps: true, tension: 0 };
      }) },
      options: baseOptions({ x: { type: 'category', title: { display: true, text: spec.x_label } }, y: axis(spec.y_label) })
    };
  }

  var BUILDERS = { pareto: paretoChart, versus: versusChart, histogram: histogramChart, breakdown: breakdownChart, lines: linesChart };

  function drawCharts(specs) {
    if (typeof Chart === 'undefined') throw new Error('Chart.js did not load');
    var drawn = {};
    var count = 0;
    var marker = {
      id: 'tuneDrawnMarker',
      afterRender: function (chart) {
        if (drawn[chart.id]) return;
        drawn[chart.id] = true;
        count += 1;
        document.body.setAttribute('data-charts-drawn', String(count));
        if (count === specs.length) document.body.setAttribute('data-charts-ms', performance.now().toFixed(0));
      }
    };
    specs.forEach(function (spec) {
      var canvas = document.getElementById(spec.id);
      var build = BUILDERS[spec.kind];
      if (!canvas || !build) throw new Error('no canvas or builder for chart ' + spec.id + ' (' + spec.kind + ')');
      var config = build(spec);
      config.plugins = [marker];
      new Chart(canvas, config);
    });
  }

  // ------------------------------------------------------- self-measurement

  // file:///report.html#measure times what a reader does with the largest
  // table (sort by throughput, filter) and records it on <body>.
  function measureTables(tables) {
    var biggest = tables.reduce(function (a, b) { return !a || b.rows.length > a.rows.length ? b : a; }, null);
    if (!biggest) return;
    var column = biggest.heads.findIndex(function (th) { return th.textContent === 'tokens/s'; });
    var t0 = performance.now();
    biggest.sortBy(Math.max(column, 0));
    var t1 = performance.now();
    biggest.applyFilter('ok adamw');
    var t2 = performance.now();
    biggest.applyFilter('');
    document.body.setAttribute('data-sort-ms', (t1 - t0).toFixed(1));
    document.body.setAttribute('data-filter-ms', (t2 - t1).toFixed(1));
    document.body.setAttribute('data-table-rows', String(biggest.rows.length));
  }

  // #measure also records how the all-trials table lays out: its tallest row, and
  // where its reason column ends against the window's width (it must not be off-screen).
  function measureLayout() {
    var table = document.querySelector('table[id$="trials-table"]');
    if (!table) return;
    var tallest = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (tr) {
      tallest = Math.max(tallest, tr.getBoundingClientRect().height);
    });
    var reason = Array.prototype.find.call(table.tHead.rows[0].cells, function (th) { return th.textContent === 'reason'; });
    document.body.setAttribute('data-trials-row-px', tallest.toFixed(0));
    document.body.setAttribute('data-reason-right-px', reason ? reason.getBoundingClientRect().right.toFixed(0) : '-1');
    document.body.setAttribute('data-window-px', String(window.innerWidth));
  }

  // ----------------------------------------------------------- what to run

  // The panel's choices: each (optimizer, risk) pair has its table in the page, hidden but the
  // default's; the controls, hidden without JavaScript, show the chosen one.
  function whatToRunChoices() {
    Array.prototype.forEach.call(document.querySelectorAll('div.wtr-controls'), function (controls) {
      var optimizer = controls.querySelector('select.wtr-optimizer');
      var risk = controls.querySelector('input.wtr-risk');
      var choices = [];
      for (var next = controls.nextElementSibling; next && next.classList.contains('wtr-choice');
           next = next.nextElementSibling) choices.push(next);
      function show() {
        var key = optimizer.value;
        if (!choices.some(function (c) { return c.getAttribute('data-optimizer') === key; })) key = 'any';
        choices.forEach(function (c) {
          c.hidden = !(c.getAttribute('data-optimizer') === key &&
                       c.getAttribute('data-risk') === (risk.checked ? '1' : '0'));
        });
      }
      optimizer.addEventListener('change', show);
      risk.addEventListener('change', show);
      controls.hidden = false;
    });
  }

  // Timings on <body> are milliseconds since navigation started (parsing included).
  function main() {
    var data = JSON.parse(document.getElementById('report-data').textContent);
    // Tables in the markup first: the paged ones are added after this query.
    var tables = Array.prototype.slice.call(document.querySelectorAll('table.data')).map(DataTable.fromPage);
    Array.prototype.slice.call(document.querySelectorAll('div.paged-table')).forEach(function (holder) {
      var spec = data.tables[holder.getAttribute('data-table')];
      if (!spec) throw new Error('no rows for table ' + holder.getAttribute('data-table'));
      tables.push(DataTable.fromData(holder, spec));
    });
    document.body.setAttribute('data-tables-ms', performance.now().toFixed(0));
    whatToRunChoices();
    drawCharts(data.charts);
    if (location.hash === '#measure') {
      measureLayout();
      measureTables(tables);
    }
    document.body.setAttribute('data-report-ready', '1');
  }

  main();
})();
