// What every page's script starts from: the data the C++ renderer put in the page, and the
// mark a test waits for once everything is drawn.

/** The JSON the renderer wrote into <script id="fragscope-data">. */
export function pageData() {
  const element = document.getElementById('fragscope-data');
  return element ? JSON.parse(element.textContent) : null;
}

/** Marks <html data-rendered="ok"> (after `draw` ran without throwing); an error shows on the page. */
export function renderPage(draw) {
  const start = performance.now();
  draw(pageData());
  document.documentElement.dataset.renderMs = String(Math.round(performance.now() - start));
  document.documentElement.dataset.rendered = 'ok';
}
