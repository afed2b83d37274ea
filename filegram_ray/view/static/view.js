/* filegram view: renders the pages from window.FG_* data (loaded by <script src>, so pages work from file://). */
"use strict";
var FG = (function () {
  var PAGE = 100;
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function param(name) { return new URLSearchParams(location.search).get(name) || ""; }
  function load(src, done) {  /* a data file by <script>: fetch() is refused on file:// pages */
    var s = document.createElement("script");
    s.src = src; s.onload = done;
    s.onerror = function () { document.querySelector("main").prepend(el("p", "cannot load " + src, "note")); };
    document.body.appendChild(s);
  }
  function fill(select, values) {
    values.forEach(function (v) { var o = el("option", v); o.value = v; select.appendChild(o); });
  }
  function fmt(v, d) { return v === null || v === undefined ? "–" : Number(v).toFixed(d === undefined ? 1 : d); }
  function sortable() {
    document.querySelectorAll("table.sortable").forEach(function (t) {
      t.querySelectorAll("th").forEach(function (th, i) {
        th.addEventListener("click", function () {
          var body = t.tBodies[0], rows = Array.prototype.slice.call(body.rows);
          var dir = th.dataset.dir === "asc" ? -1 : 1; th.dataset.dir = dir === 1 ? "asc" : "desc";
          rows.sort(function (a, b) {
            var x = a.cells[i], y = b.cells[i];
            var xv = x.dataset.v !== undefined ? x.dataset.v : x.textContent;
            var yv = y.dataset.v !== undefined ? y.dataset.v : y.textContent;
            var xn = parseFloat(xv), yn = parseFloat(yv);
            if (!isNaN(xn) && !isNaN(yn)) return dir * (xn - yn);
            if (isNaN(xn) !== isNaN(yn)) return isNaN(xn) ? 1 : -1;
            return dir * String(xv).localeCompare(String(yv));
          });
          rows.forEach(function (r) { body.appendChild(r); });
        });
      });
    });
  }
  function pager(render, total) {
    var page = 0;
    function draw() {
      var n = total(), pages = Math.max(1, Math.ceil(n / PAGE));
      if (page >= pages) page = pages - 1;
      render(page * PAGE, (page + 1) * PAGE);
      document.getElementById("page").textContent = "page " + (page + 1) + " of " + pages;
    }
    document.getElementById("prev").onclick = function () { if (page > 0) { page--; draw(); } };
    document.getElementById("next").onclick = function () { page++; draw(); };
    return { draw: function (reset) { if (reset) page = 0; draw(); } };
  }

  /* an answer's outcome (view/build.py: outcome): "1" right, "0" wrong, "p" partial (open-ended), "e" error */
  var OUTCOME_CLASS = { "1": "ok", "0": "bad", "p": "part", "e": "bad" };
  function mark(v, isOpen) {
    var sign = { "1": "✓", "0": "✗", "p": "◐", "e": "⚠" }[v[0]];
    return isOpen && v[1] !== null && v[1] !== undefined ? sign + " " + fmt(v[1], 0) : sign;
  }
  function itemsPage() {
    var D = window.FG_ITEMS, rows = D.rows, shown = rows;
    var fs = document.getElementById("f-sub"), fm = document.getElementById("f-method"),
        fc = document.getElementById("f-correct");
    fill(fs, D.sub_tasks); fill(fm, D.methods);
    var body = document.querySelector("#items tbody");
    var p = pager(function (a, b) {
      body.textContent = "";
      shown.slice(a, b).forEach(function (r) {
        var tr = el("tr"), td = el("td"), link = el("a", r[0]);
        link.href = "item.html?id=" + encodeURIComponent(r[1]); td.appendChild(link); tr.appendChild(td);
        tr.appendChild(el("td", r[2])); tr.appendChild(el("td", r[3])); tr.appendChild(el("td", r[4]));
        var ans = el("td"), m = fm.value;
        Object.keys(r[5]).sort().forEach(function (k) {
          if (m && k !== m) return;
          ans.appendChild(el("span", k + " " + mark(r[5][k], r[6]) + " ", OUTCOME_CLASS[r[5][k][0]]));
        });
        tr.appendChild(ans); body.appendChild(tr);
      });
    }, function () { return shown.length; });
    function apply() {
      var s = fs.value, m = fm.value, c = fc.value;
      shown = rows.filter(function (r) {
        if (s && r[2] !== s) return false;
        var ms = m ? [m] : Object.keys(r[5]);
        if (m && !(m in r[5])) return false;
        if (!c) return true;
        return ms.some(function (k) { return r[5][k][0] === c; });
      });
      document.getElementById("count").textContent = shown.length + " of " + rows.length + " items";
      p.draw(true);
    }
    [fs, fm, fc].forEach(function (x) { x.onchange = apply; });
    apply();
  }

  function answerBlock(a) {
    var d = el("div", null, "answer");
    d.appendChild(el("h3", a.method));
    d.appendChild(el("p", "answer: " + (a.choice || "–") + " · score " + fmt(a.score) +
      (a.status !== "ok" ? " · " + a.status + ": " + a.error : ""), OUTCOME_CLASS[a.outcome]));
    d.appendChild(el("p", "context returned: " + (a.context_ref === null ? "not recorded" :
      (a.context_tokens + " tokens, " + a.context_chars + " characters")), "small"));
    var pre = el("pre", a.context_ref === null ? "(this run recorded no context for this method)" : "loading…",
      "context");
    d.appendChild(pre);
    if (a.context_ref !== null) {  /* one file per distinct context, loaded when shown */
      var put = function () { var t = window.FG_CTX[a.context_ref]; pre.textContent = t === "" ? "(empty context)" : t; };
      if (window.FG_CTX && a.context_ref in window.FG_CTX) put(); else load("data/ctx/" + a.context_ref + ".js", put);
    }
    d.appendChild(el("p", "reader's raw output:", "small"));
    d.appendChild(el("pre", a.raw || "(empty)", "raw"));
    return d;
  }
  function itemPage() {
    var id = param("id");
    if (!/^[A-Za-z0-9._-]+$/.test(id)) { document.getElementById("qid").textContent = "no item chosen"; return; }
    load("data/items/" + id + ".js", function () {
      var I = window.FG_ITEM;
      document.getElementById("qid").textContent = I.question_id;
      document.getElementById("meta").textContent = [I.sub_track, I.channel, I.setting].join(" · ");
      document.getElementById("question").textContent = I.question;
      var ol = document.getElementById("choices");
      I.choices.forEach(function (c) { ol.appendChild(el("li", c)); });
      document.getElementById("key").textContent = I.is_open ? (I.key_text || I.key) :
        I.key + (I.key_text ? " — " + I.key_text : "");
      var body = document.querySelector("#answers tbody");
      I.answers.forEach(function (a) {
        var tr = el("tr"), said = I.is_open ? (a.raw || "–") : (a.choice || "–");
        tr.dataset.method = a.method; tr.dataset.outcome = a.outcome;
        tr.appendChild(el("td", a.method));
        tr.appendChild(el("td", a.status !== "ok" ? "error: " + a.error : mark([a.outcome, a.score], I.is_open) +
          " " + said, OUTCOME_CLASS[a.outcome]));
        tr.appendChild(el("td", fmt(a.score))); tr.appendChild(el("td", a.context_tokens === null ? "–" : a.context_tokens));
        body.appendChild(tr);
      });
      var names = I.answers.map(function (a) { return a.method; });
      ["left", "right"].forEach(function (side, k) {
        var col = document.getElementById(side), pick = col.querySelector(".pick"), out = col.querySelector(".body");
        fill(pick, names);
        var want = param(side === "left" ? "a" : "b");
        pick.value = names.indexOf(want) >= 0 ? want : names[Math.min(k, names.length - 1)];
        function show() {
          out.textContent = "";
          I.answers.forEach(function (a) { if (a.method === pick.value) out.appendChild(answerBlock(a)); });
        }
        pick.onchange = show; show();
      });
    });
  }

  function trajsPage() {
    var rows = window.FG_TRAJ, shown = rows;
    var fp = document.getElementById("f-profile"), fx = document.getElementById("f-pert");
    var profiles = []; rows.forEach(function (r) { if (profiles.indexOf(r[2]) < 0) profiles.push(r[2]); });
    fill(fp, profiles);
    var body = document.querySelector("#trajs tbody");
    var p = pager(function (a, b) {
      body.textContent = "";
      shown.slice(a, b).forEach(function (r) {
        var tr = el("tr"), td = el("td"), link = el("a", r[0]);
        link.href = "trajectory.html?id=" + encodeURIComponent(r[1]); td.appendChild(link); tr.appendChild(td);
        tr.appendChild(el("td", r[2])); tr.appendChild(el("td", r[3]));
        tr.appendChild(el("td", r[7] ? "error" : r[4], r[7] ? "bad" : "")); tr.appendChild(el("td", r[5] ? "yes" : ""));
        tr.appendChild(el("td", r[6] ? "▶" : ""));
        if (r[5]) tr.className = "pert";
        body.appendChild(tr);
      });
    }, function () { return shown.length; });
    function apply() {
      shown = rows.filter(function (r) { return (!fp.value || r[2] === fp.value) && (!fx.checked || r[5]); });
      document.getElementById("count").textContent = shown.length + " of " + rows.length;
      p.draw(true);
    }
    fp.onchange = apply; fx.onchange = apply; apply();
  }
  function trajPage() {
    var id = param("id");
    if (!/^[A-Za-z0-9._-]+$/.test(id)) { document.getElementById("tid").textContent = "no trajectory chosen"; return; }
    load("data/traj/" + id + ".js", function () {
      var T = window.FG_T;
      document.getElementById("tid").textContent = T.id;
      document.getElementById("pert").textContent = T.perturbation ? "perturbed: " + JSON.stringify(T.perturbation)
        : "not perturbed";
      document.getElementById("terror").textContent = T.error || "";
      var body = document.querySelector("#timeline tbody");
      T.events.forEach(function (e, i) {
        var tr = el("tr");
        if (e.perturbed) tr.className = "pert";
        tr.appendChild(el("td", i + 1)); tr.appendChild(el("td", e.t === null ? "–" : e.t.toFixed(1)));
        tr.appendChild(el("td", e.type)); tr.appendChild(el("td", e.path));
        var c = el("td");
        [["snapshot", e.snapshot], ["diff", e.diff]].forEach(function (m) {
          if (m[1] === null || m[1] === undefined) return;
          var det = el("details"); det.appendChild(el("summary", m[0])); det.appendChild(el("pre", m[1]));
          c.appendChild(det);
        });
        tr.appendChild(c); body.appendChild(tr);
      });
      if (T.video) {
        var v = el("video"); v.src = T.video; v.controls = true; v.width = 480;
        var box = document.getElementById("video"); box.appendChild(el("h2", "Guidance video")); box.appendChild(v);
      }
      /* the SVG is drawn by the builder from numbers only (feature names escaped there) */
      document.getElementById("fingerprint").innerHTML = T.fingerprint_svg ||
        "<p class='small'>no Engram for this trajectory (encode has not run on it)</p>";
    });
  }
  document.addEventListener("DOMContentLoaded", sortable);
  return { itemsPage: itemsPage, itemPage: itemPage, trajsPage: trajsPage, trajPage: trajPage };
})();
