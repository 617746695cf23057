  // memjudge.web's common script: inlined by memjudge.web.app.page_template at the top of every
  // page's one script, so that a page (and an exported file) stays one self-contained document
  // under its Content-Security-Policy. Every text from the data goes through textContent.

  // A JSON request carrying the run's token in its header; `down` is what to say when no
  // server answers (the page's own command is still running, or not).
  function memjudgeApi(token, down) {
    return async function api(path, opts) {
      opts = opts || {};
      opts.headers = Object.assign({"X-Memjudge-Token": token}, opts.headers || {});
      opts.cache = "no-store";
      let r;
      try { r = await fetch(path, opts); }
      catch (e) { throw new Error(down); }
      let body = null;
      try { body = await r.json(); } catch (e) { body = null; }
      if (!r.ok) throw new Error((body && body.error) || ("HTTP " + r.status));
      return body;
    };
  }

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
