// The doctor's HTML report (src/report/doctor_html.cpp writes the page and its data).
import 'uplot/dist/uPlot.min.css';
import { renderPage } from '../common/page.js';

renderPage(() => {});
