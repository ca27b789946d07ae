/* Sections a page shows once it has loaded (data-later: the address of the section's HTML),
   so that the page does not wait for them: the section fetched (with the session's cookie)
   takes its placeholder's place, and "lakeview:later" is dispatched on the document with it,
   for the scripts that draw in it (static/js/health_charts.js). */
(function () {
  "use strict";
  function fill(placeholder) {
    if (placeholder.getAttribute("data-loading")) { return; }
    placeholder.setAttribute("data-loading", "1");
    fetch(placeholder.getAttribute("data-later"), {
      credentials: "same-origin",
      headers: { Accept: "text/html" },
    })
      .then(function (response) {
        if (!response.ok) { throw new Error(String(response.status)); }
        return response.text();
      })
      .then(function (html) {
        var section = new DOMParser().parseFromString(html, "text/html").body.firstElementChild;
        if (!section) { throw new Error("empty"); }
        placeholder.replaceWith(section);
        document.dispatchEvent(new CustomEvent("lakeview:later", { detail: section }));
      })
      .catch(function () {
        var note = placeholder.querySelector(".later-note");
        if (note) { note.textContent = "This section could not be loaded: reload the page to try again."; }
      });
  }
  Array.prototype.forEach.call(document.querySelectorAll("[data-later]"), fill);
})();
