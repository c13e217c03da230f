// kvwitness embed: <kvw-replay src="RECEIPT_URL"></kvw-replay>
//
// Load this file as a module from a kvwitness site; it defines the custom
// element <kvw-replay>. Each element fetches its receipt (src) and the
// site's public key (key, default: kvw.pub.json next to this script),
// verifies the signature in WebAssembly and mounts the seven-step replay
// in its shadow tree, styled there and nowhere else. A receipt that fails verification is shown as a warning,
// never replayed. Whatever the element contains before mounting is kept,
// except children marked data-kvw-fallback (a link to the static replay,
// say: what readers without JavaScript see), which the replay replaces.
//
// Attributes: src (required), key, lang ("en" or "it"; default: the host
// page's <html lang>), sync-url (present: the replay writes #step-N into the
// host page's address; absent: the host's address is never touched). The
// arrow keys step the replay while it has focus. The element gets
// data-kvw-ready="1" once a verified replay is mounted, and data-kvw-error
// with the reason when the receipt cannot be fetched or does not verify.

const base = new URL(".", import.meta.url);
const explorers = new Map();

// Each language has its own build (pkg/ English, pkg/it/ Italian), which
// carries that language's text only; elements of both languages may share
// a page, each loading its build once.
function loadExplorer(lang) {
  const pkg = lang === "it" ? "pkg/it/" : "pkg/";
  if (!explorers.has(pkg)) {
    explorers.set(pkg, import(new URL(pkg + "kvw_explorer.js", base).href).then(async (module) => {
      await module.default({ module_or_path: new URL(pkg + "kvw_explorer_bg.wasm", base) });
      return module;
    }));
  }
  return explorers.get(pkg);
}

class KvwReplay extends HTMLElement {
  async connectedCallback() {
    if (this.dataset.kvwMounting) return;
    this.dataset.kvwMounting = "1";
    const src = this.getAttribute("src");
    if (!src) {
      this.textContent = "kvw-replay: the src attribute (receipt URL) is missing.";
      return;
    }
    // The replay lives in the element's shadow tree with its own copy of
    // the style sheet: nothing of it reaches the host page's styles, and
    // the host's rules do not reach into it. The element's own children
    // stay in the light tree, shown through the slot.
    // Focus given to the element goes to the replay inside (arrow keys).
    const shadow = this.attachShadow({ mode: "open", delegatesFocus: true });
    const style = document.createElement("link");
    style.rel = "stylesheet";
    style.href = new URL("style.css", base).href;
    const mount = document.createElement("div");
    shadow.append(style, mount, document.createElement("slot"));
    const receipt = new URL(src, document.baseURI).href;
    const key = this.getAttribute("key")
      ? new URL(this.getAttribute("key"), document.baseURI).href
      : new URL("kvw.pub.json", base).href;
    const lang = (this.getAttribute("lang") || document.documentElement.lang || "en").toLowerCase().startsWith("it") ? "it" : "en";
    const fallback = [...this.querySelectorAll(":scope > [data-kvw-fallback]")];
    try {
      const module = await loadExplorer(lang);
      for (const child of fallback) child.remove();
      await module.mount_to(mount, receipt, key, lang, this.hasAttribute("sync-url"));
      // What the replay says of itself, said by the element the host sees.
      for (const flag of ["kvwReady", "kvwError"]) {
        if (mount.dataset[flag] !== undefined) this.dataset[flag] = mount.dataset[flag];
      }
    } catch (error) {
      // Nothing was mounted (the receipt or key could not be fetched, or the
      // build did not load): say why, and keep the link to the static page.
      mount.remove();
      this.dataset.kvwError = String(error);
      const p = document.createElement("p");
      p.setAttribute("role", "alert");
      p.textContent = `The replay could not be loaded: ${error}`;
      this.append(p, ...fallback);
    }
  }
}

if (!customElements.get("kvw-replay")) customElements.define("kvw-replay", KvwReplay);
