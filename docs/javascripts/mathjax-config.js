// MathJax 3 for pymdownx.arithmatex (generic: true), which wraps math in \( \) and \[ \] inside .arithmatex
// elements: typeset only those. MathJax itself (javascripts/mathjax/tex-svg.js, ~2 MB, copied into the site by
// docs/hooks.py) is loaded only by a page that has math, as the script with id MathJax-script.
window.MathJax = {
  tex: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true, processEnvironments: true },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" },
  svg: { fontCache: "global" },
  loader: { load: [] },
};
if (document.querySelector(".arithmatex")) {
  const script = document.createElement("script");
  script.id = "MathJax-script";
  script.src = new URL("mathjax/tex-svg.js", document.currentScript.src).href;
  document.head.appendChild(script);
}
