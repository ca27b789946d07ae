// The upload page's first step with a progress bar: the form is sent with XMLHttpRequest,
// whose upload events say how much has gone. The answer (the review page, or this page
// with an error) replaces the page. Without this script the form posts as any other.
(function () {
  "use strict";
  var form = document.getElementById("upload-form");
  if (!form || !window.XMLHttpRequest || !window.FormData) return;
  var box = document.getElementById("upload-progress");
  var bar = document.getElementById("upload-progress-bar");
  var text = document.getElementById("upload-progress-text");
  var button = document.getElementById("upload-submit");
  var maxBytes = parseInt(form.getAttribute("data-max-bytes"), 10);

  function megabytes(n) { return (n / 1048576).toFixed(1) + " MB"; }

  form.addEventListener("submit", function (event) {
    var input = form.querySelector("input[type=file]");
    var file = input && input.files && input.files[0];
    if (!file) return; // the server says what is missing
    event.preventDefault();
    if (maxBytes && file.size > maxBytes) {
      box.hidden = false;
      text.textContent = "The file is " + megabytes(file.size) + ", over the limit of " +
        megabytes(maxBytes) + ".";
      return;
    }
    var request = new XMLHttpRequest();
    request.open("POST", form.action || window.location.href);
    // The CSRF token as a header too: an upload refused for its size has no form fields.
    var token = form.querySelector("input[name=csrfmiddlewaretoken]");
    if (token) request.setRequestHeader("X-CSRFToken", token.value);
    request.upload.addEventListener("progress", function (e) {
      if (!e.lengthComputable) return;
      bar.value = Math.floor((e.loaded / e.total) * 100);
      text.textContent = megabytes(e.loaded) + " of " + megabytes(e.total) + " sent";
    });
    request.upload.addEventListener("load", function () {
      text.textContent = "Sent; reading the file's first rows...";
    });
    request.addEventListener("load", function () {
      if (request.responseURL && request.responseURL !== window.location.href) {
        window.location.assign(request.responseURL); // the review page
        return;
      }
      // This page again, with the error: shown as the server rendered it.
      document.open();
      document.write(request.responseText);
      document.close();
    });
    request.addEventListener("error", function () {
      button.disabled = false;
      text.textContent = "The upload failed (the connection was lost); try again.";
    });
    box.hidden = false;
    button.disabled = true;
    request.send(new FormData(form));
  });
})();
