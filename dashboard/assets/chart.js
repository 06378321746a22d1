// A small time-series line chart on a canvas: fixed window of points, one line
// per series, autoscaled y axis with a few grid lines. No dependencies.
export class LineChart {
  constructor(canvas, series, windowSize = 90) {
    this.canvas = canvas;
    this.series = series; // [{name, color}]
    this.windowSize = windowSize;
    this.points = []; // [{t, values: [..]}]
  }

  push(t, values) {
    this.points.push({ t, values });
    if (this.points.length > this.windowSize) this.points.shift();
    this.draw();
  }

  draw() {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth, h = c.clientHeight;
    if (c.width !== w * dpr || c.height !== h * dpr) { c.width = w * dpr; c.height = h * dpr; }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const left = 52, right = 10, top = 10, bottom = 22;
    const pw = w - left - right, ph = h - top - bottom;
    let max = 1;
    for (const p of this.points) for (const v of p.values) if (v > max) max = v;
    max = niceCeil(max);
    g.font = '11px system-ui, sans-serif';
    g.strokeStyle = '#e6e3f0'; g.fillStyle = '#6b6880'; g.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const y = top + ph - (ph * i) / 4;
      g.beginPath(); g.moveTo(left, y); g.lineTo(left + pw, y); g.stroke();
      g.fillText(fmt(max * i / 4), 4, y + 4);
    }
    g.fillText('per second, last ' + this.windowSize * 2 + ' s', left, h - 6);
    const n = this.windowSize;
    this.series.forEach((s, k) => {
      g.strokeStyle = s.color; g.lineWidth = 2; g.beginPath();
      this.points.forEach((p, i) => {
        const x = left + pw * (i + n - this.points.length) / (n - 1);
        const y = top + ph - ph * (p.values[k] / max);
        if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
      });
      g.stroke();
    });
  }
}

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

export function fmt(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(1) + 'M';
  if (v >= 1e3) return (v / 1e3).toFixed(1) + 'k';
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}
