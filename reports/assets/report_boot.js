// tune report, first script: records every error the page meets (script
// errors, rejected promises, console.error, anything the content security
// policy blocks) into #report-errors, so a reader sees them and a headless
// browser's --dump-dom reveals them to the tests.
(function () {
  'use strict';
  var errors = [];
  // Charts need scripts: without this class the stylesheet hides their empty boxes.
  document.documentElement.classList.add('js');

  function show() {
    var box = document.getElementById('report-errors');
    if (!box) return;
    box.hidden = errors.length === 0;
    box.textContent = errors.join('\n');
    document.body.setAttribute('data-errors', String(errors.length));
  }

  function record(text) {
    errors.push(String(text));
    show();
  }

  window.addEventListener('error', function (event) {
    var where = event.filename ? ' (' + event.filename + ':' + event.lineno + ')' : '';
    var what = event.message || ('failed to load ' + (event.target && event.target.tagName));
    record('error: ' + what + where);
  }, true);
  window.addEventListener('unhandledrejection', function (event) {
    record('unhandled promise rejection: ' + event.reason);
  });
  document.addEventListener('securitypolicyviolation', function (event) {
    record('blocked by the content security policy: ' + event.violatedDirective + ' ' + event.blockedURI);
  });
  var consoleError = console.error;
  console.error = function () {
    record('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return consoleError.apply(console, arguments);
  };
  document.addEventListener('DOMContentLoaded', show);
})();
