// The one interaction the page has: hide the rows where every target passed.
(function () {
  "use strict";
  var toggle = document.getElementById("only-failing");
  if (toggle) {
    toggle.addEventListener("change", function () {
      var rows = document.querySelectorAll("table.matrix tbody tr");
      for (var i = 0; i < rows.length; i++) {
        rows[i].hidden = toggle.checked && rows[i].getAttribute("data-all-passed") === "true";
      }
    });
  }
  // Lets a headless browser (and its test) see that the script ran to the end.
  document.documentElement.setAttribute("data-ready", "true");
})();
