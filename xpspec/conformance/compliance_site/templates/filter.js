(function () {
  var root = document.getElementById("xpspec-matrix");
  var form = root && root.querySelector("form.filters");
  if (!form) { return; }
  var rows = Array.prototype.slice.call(root.querySelectorAll("table.matrix tbody tr"));
  var shown = form.querySelector(".shown");
  function checked(name) {
    var out = {};
    form.querySelectorAll('input[name="' + name + '"]').forEach(function (box) {
      out[box.value] = box.checked;
    });
    return out;
  }
  function apply() {
    var areas = checked("area"), outcomes = checked("outcome"), count = 0;
    rows.forEach(function (row) {
      var keys = row.getAttribute("data-outcomes").split(" ");
      var visible = areas[row.getAttribute("data-area")] === true &&
        keys.some(function (k) { return outcomes[k] === true; });
      row.hidden = !visible;
      if (visible) { count += 1; }
      row.querySelectorAll("td[data-o]").forEach(function (cell) {
        cell.classList.toggle("dim", outcomes[cell.getAttribute("data-o")] !== true);
      });
    });
    shown.textContent = count + " of " + rows.length + " clauses shown";
  }
  form.addEventListener("change", apply);
  form.querySelector("button.all").addEventListener("click", function () {
    form.querySelectorAll("input").forEach(function (box) { box.checked = true; });
    apply();
  });
  form.hidden = false;
  apply();
})();
