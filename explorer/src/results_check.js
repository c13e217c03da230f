// The browser's check of the receipts a static result page shows (scenario,
// gates, randomized run, model check), inlined in <head>. For every receipt
// named in the page's #kvw-results data it fetches receipts/<stem>.json and
// checks it like a replay page does (receipt_verify.js); the verdict lands on
// the receipt's banner as data-kvw-verdict = ok | bad | unsupported. A
// refused file hides what the page says about it: the part marked
// data-kvw-receipt=<stem> if the page has one (the other receipts' parts
// stay shown), else the whole body, by marking <html> data-kvw-tampered
// (the style sheet keeps the warning and the way back).
document.addEventListener("DOMContentLoaded", () => {
  const data = JSON.parse(document.getElementById("kvw-results").textContent);
  for (const r of data.receipts) {
    const banner = document.getElementById("kvw-trust-" + r.stem);
    const bytes = window.kvwFetchBytes(data.root + "receipts/" + r.stem + ".json");
    window
      .kvwVerifyReceipt(bytes, data.public_key, r.sha256)
      .catch(() => "bad")
      .then((verdict) => {
        if (banner) banner.dataset.kvwVerdict = verdict;
        if (verdict !== "bad") return;
        const parts = document.querySelectorAll(`[data-kvw-receipt="${CSS.escape(r.stem)}"]`);
        for (const part of parts) part.dataset.kvwRefused = "1";
        if (parts.length === 0) document.documentElement.dataset.kvwTampered = "1";
      });
  }
});
