// The doctor's HTML report: src/report/doctor_html.cpp writes the text and the page's data
// (doctor_page_data.cpp); this draws the panels the data holds.
import 'uplot/dist/uPlot.min.css';
import './report.css';
import { renderPage } from '../common/page.js';
import { drawMemoryCurve } from './memory_curve.js';
import { drawRanks } from './ranks.js';
import { drawSegmentLot } from './segment_lot.js';
import { drawSmiTrace, drawStepTimes } from './telemetry.js';

renderPage((data) => {
  const place = (id) => document.getElementById(id);
  if (data.segments && place('segment-lot')) drawSegmentLot(place('segment-lot'), data.segments);
  if (data.curve && place('memory-curve')) drawMemoryCurve(place('memory-curve'), data.curve);
  if (data.smi && place('smi-trace')) drawSmiTrace(place('smi-trace'), data.smi);
  if (data.steps && place('step-times')) drawStepTimes(place('step-times'), data.steps);
  if (data.ranks.length && place('ranks')) drawRanks(place('ranks'), data.ranks);
});
