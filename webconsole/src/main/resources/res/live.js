// peerdirect live plots: one uPlot chart per kind, one series per device, fed by server-sent events.
(function () {
  var KEEP = 300;                       // points kept per chart (five minutes)
  var kinds = ['faults', 'invalidations', 'bytes'];
  var charts = {}, names = {}, data = {};
  var points = 0;
  window.pdPoints = 0;
  window.pdMaxBytes = 0;                // the largest bytes/s seen (the browser test reads it)

  // 1200000 -> "1.2M": the bytes axis stays readable at GB/s
  function si(v) {
    var units = ['', 'k', 'M', 'G', 'T'], i = 0;
    while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i++; }
    return (Math.round(v * 10) / 10) + units[i];
  }

  function chart(kind, series) {
    var el = document.getElementById('plot-' + kind);
    if (charts[kind]) { charts[kind].destroy(); }
    el.innerHTML = '';
    var palette = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'];
    var opts = { width: Math.max(400, el.clientWidth || 800), height: 200,
      series: [{}].concat(series.map(function (s, i) { return { label: s, stroke: palette[i % palette.length] }; })),
      axes: [{}, { size: 90, values: function (u, vals) { return vals.map(si); } }] };
    data[kind] = [[]].concat(series.map(function () { return []; }));
    names[kind] = series;
    charts[kind] = new uPlot(opts, data[kind], el);
  }

  function add(p) {
    kinds.forEach(function (kind) {
      var series = Object.keys(p.v).filter(function (k) { return k.indexOf(kind + '/') === 0; })
        .map(function (k) { return k.substring(kind.length + 1); });
      if (!names[kind] || names[kind].join() !== series.join()) { chart(kind, series); }
      var d = data[kind];
      d[0].push(p.t / 1000);
      series.forEach(function (s, i) {
        var v = p.v[kind + '/' + s];
        d[i + 1].push(v);
        if (kind === 'bytes' && v > window.pdMaxBytes) { window.pdMaxBytes = v; }
      });
      if (d[0].length > KEEP) { d.forEach(function (a) { a.shift(); }); }
      charts[kind].setData(d);
    });
    points++;
    window.pdPoints = points;
    document.getElementById('points').textContent = points;
    document.getElementById('dropped').textContent = p.dropped;
  }

  var src = new EventSource(window.location.pathname.replace(/\/$/, '') + '/events');
  src.onmessage = function (e) { add(JSON.parse(e.data)); };
})();
