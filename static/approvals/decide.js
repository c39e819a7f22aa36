// An approval's Decide box (templates/approvals/_decide.html): one form, both notes.
//
// No key decides. `a` puts the cursor in the approval's note, `r` in "Why reject" — keys
// typed there are the note's — and Esc leaves a note, keeping its text. Approving takes a
// click, or Tab to Approve; it then asks first, in a native <dialog> whose focus starts on
// Cancel (so an Enter or a space right after it cancels):
// - "Approve, or reject?" when a reason to reject was typed, so it is never dropped;
// - the confirmation naming what is released, for a tool that cannot be taken back by a
//   click (the dialog is on the page only then).
// The server asks the same without JavaScript (toolops/approvals/deciding.py). In "Why
// reject", Ctrl+Enter rejects after a confirm. No inline script: the CSP allows none.
(function () {
  "use strict";
  const box = document.querySelector("[data-shortcuts=decide]");
  const form = box && box.querySelector("form.decide-form");
  if (!form) { return; }
  const approve = form.querySelector("button[value=approve]");
  const reject = form.querySelector("button[value=reject]");
  const note = form.querySelector("textarea[name=note]");
  const reason = form.querySelector("textarea[name=reject_reason]");
  const confirmed = form.querySelector("input[name=confirmed]");
  const discard = form.querySelector("input[name=discard_reason]");
  const confirming = document.getElementById("confirm-approve");
  const which = document.getElementById("which-decision");

  // Each question is asked afresh: a choice made for one submit never carries to the next
  // (nor back, with the browser's back button, into a page from its cache).
  function forget() {
    confirmed.disabled = true;
    discard.disabled = true;
  }
  window.addEventListener("pageshow", forget);

  // While a question is open the Decide box is hidden from assistive technology as well
  // as inert (showModal): its Approve is not the button to press now, for a screen
  // reader or a test suite looking for one named "Approve" any more than for a mouse.
  function ask(dialog) {
    box.setAttribute("aria-hidden", "true");
    dialog.showModal();
    const safe = dialog.querySelector("[autofocus]");
    if (safe) { safe.focus(); }
  }
  [confirming, which].forEach(function (dialog) {
    if (!dialog) { return; }
    dialog.addEventListener("close", function () {
      if (!document.querySelector("dialog[open]")) { box.removeAttribute("aria-hidden"); }
    });
  });

  form.addEventListener("submit", function (event) {
    if (event.submitter !== approve) { return; }
    const typed = reason.value.trim();
    if (typed && discard.disabled) {
      event.preventDefault();
      which.querySelector(".typed-reason").textContent = typed;
      ask(which);
    } else if (confirming && confirmed.disabled) {
      event.preventDefault();
      ask(confirming);
    }
  });

  function answered(dialog, choose) {
    dialog.addEventListener("click", function (event) {
      const button = event.target.closest("button[data-choice]");
      if (!button) { return; }
      dialog.close(button.dataset.choice);
      choose(button.dataset.choice);
    });
    // Esc closes a dialog as Cancel does.
    dialog.addEventListener("cancel", function () { forget(); });
  }
  if (confirming) {
    answered(confirming, function (choice) {
      if (choice === "confirm") {
        confirmed.disabled = false;
        form.requestSubmit(approve);
      } else {
        forget();
      }
    });
  }
  answered(which, function (choice) {
    if (choice === "reject") {
      form.requestSubmit(reject);
    } else if (choice === "approve") {
      discard.disabled = false;
      form.requestSubmit(approve);  // a confirmation may follow
    } else {
      forget();
    }
  });

  function rejectFromReason(event) {
    event.preventDefault();
    const typed = reason.value.trim();
    if (!typed) {
      reason.setAttribute("aria-invalid", "true");
      return;
    }
    reason.removeAttribute("aria-invalid");
    if (window.confirm("Reject this call? The agent is told: " + typed)) {
      form.requestSubmit(reject);
    }
  }
  function typing(target) {
    const tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" ||
      Boolean(target && target.isContentEditable);
  }

  document.addEventListener("keydown", function (event) {
    if (document.querySelector("dialog[open]")) { return; }  // the dialog's own keys
    if (event.target === reason && event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      rejectFromReason(event);
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (typing(event.target)) {
      if (event.key === "Escape" && form.contains(event.target)) { event.target.blur(); }
      return;
    }
    if (event.key === "a") {
      event.preventDefault();
      note.focus();
    } else if (event.key === "r") {
      event.preventDefault();
      reason.focus();
    }
  });
})();
