// The browser's check of the receipts a static result page shows (scenario,
// gates, randomized run, model check), inlined in <head>. For every receipt
// named in the page's #kvw-results data it fetches receipts/<stem>.json and
// checks it like a replay page does (receipt_verify.js); the verdict lands on
// the receipt's banner as data-kvw-verdict = ok | bad | unsupported, and a
// refused file marks <html> data-kvw-tampered, which hides what the page
// says about the results (the style sheet keeps the warning and the way back).
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
        if (verdict === "bad") document.documentElement.dataset.kvwTampered = "1";
      });
  }
});
