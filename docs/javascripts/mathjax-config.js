// MathJax 3 for pymdownx.arithmatex (generic: true): it wraps math in \( \) and \[ \] inside .arithmatex spans
// and divs; typeset only those. Loaded before javascripts/mathjax/tex-svg.js (mkdocs.yml: extra_javascript).
window.MathJax = {
  tex: { inlineMath: [["\\(", "\\)"]], displayMath: [["\\[", "\\]"]], processEscapes: true, processEnvironments: true },
  options: { ignoreHtmlClass: ".*|", processHtmlClass: "arithmatex" },
  svg: { fontCache: "global" },
  loader: { load: [] },
};
