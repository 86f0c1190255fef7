// simjax scene player: a small WebGL renderer for the scene data embedded in this page
// (element #simjax-scene). No library, no network: the page works offline.
(function () {
  "use strict";
  const S = JSON.parse(document.getElementById("simjax-scene").textContent);
  const canvas = document.getElementById("simjax-view");
  const status = document.getElementById("simjax-status");
  function decode(s, T) {
    const bin = atob(s), buf = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) buf[i] = bin.charCodeAt(i);
    return new T(buf.buffer);
  }
  const gl = canvas.getContext("webgl", { antialias: true, preserveDrawingBuffer: true }) ||
             canvas.getContext("experimental-webgl", { preserveDrawingBuffer: true });
  if (!gl) { status.textContent = "WebGL is not available in this browser."; return; }
  const uint32 = !!gl.getExtension("OES_element_index_uint");

  const VS = "attribute vec3 a_pos; attribute vec3 a_nrm; attribute vec3 a_col;" +
    "uniform mat4 u_vp; uniform mat3 u_R; uniform vec3 u_p; uniform vec3 u_color; uniform float u_vcol;" +
    "varying vec3 v_n; varying vec3 v_c;" +
    "void main(){ vec3 w = u_R * a_pos + u_p; v_n = u_R * a_nrm; v_c = mix(u_color, a_col, u_vcol);" +
    " gl_Position = u_vp * vec4(w, 1.0); }";
  const FS = "precision mediump float; varying vec3 v_n; varying vec3 v_c;" +
    "uniform float u_alpha; uniform float u_lit; uniform vec3 u_light;" +
    "void main(){ float len = length(v_n); vec3 n = len > 0.0 ? v_n / len : vec3(0.0);" +
    " float d = abs(dot(n, u_light)); float l = mix(1.0, 0.3 + 0.7 * d, u_lit);" +
    " gl_FragColor = vec4(v_c * l, u_alpha); }";
  function shader(type, src) {
    const s = gl.createShader(type); gl.shaderSource(s, src); gl.compileShader(s);
    if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
    return s;
  }
  const prog = gl.createProgram();
  gl.attachShader(prog, shader(gl.VERTEX_SHADER, VS)); gl.attachShader(prog, shader(gl.FRAGMENT_SHADER, FS));
  gl.linkProgram(prog); gl.useProgram(prog);
  const A = {}, U = {};
  for (const a of ["a_pos", "a_nrm", "a_col"]) A[a] = gl.getAttribLocation(prog, a);
  for (const u of ["u_vp", "u_R", "u_p", "u_color", "u_vcol", "u_alpha", "u_lit", "u_light"])
    U[u] = gl.getUniformLocation(prog, u);

  function buffer(data, target) {
    const b = gl.createBuffer(); gl.bindBuffer(target || gl.ARRAY_BUFFER, b);
    gl.bufferData(target || gl.ARRAY_BUFFER, data, gl.STATIC_DRAW); return b;
  }
  // meshes: positions, normals, optional vertex colours, triangle indices
  const meshes = S.meshes.map(function (m) {
    let idx = decode(m.i, Uint32Array);
    const nv = decode(m.v, Float32Array).length / 3;
    if (!uint32) {
      if (nv > 65535) return null;
      idx = new Uint16Array(idx);
    }
    return { pos: buffer(decode(m.v, Float32Array)), nrm: buffer(decode(m.n, Float32Array)),
             col: m.c ? buffer(decode(m.c, Float32Array)) : null,
             idx: buffer(idx, gl.ELEMENT_ARRAY_BUFFER), count: idx.length,
             type: uint32 ? gl.UNSIGNED_INT : gl.UNSIGNED_SHORT };
  });
  const nF = S.times.length, V = S.visuals.length, M = S.n_markers, P = S.n_paths, L = S.path_width;
  const E = S.n_forces, K = S.n_experimental, B = S.follow.length;
  const tracks = S.tracks.map(function (t) {
    return { name: t.name, color: t.color, ghost: t.ghost, shown: true,
             poses: decode(t.poses, Float32Array), markers: decode(t.markers, Float32Array),
             paths: decode(t.paths, Float32Array), count: decode(t.path_count, Uint16Array),
             rgb: decode(t.path_rgb, Uint8Array), fp: decode(t.force_points, Float32Array),
             fv: decode(t.force_vectors, Float32Array), ex: decode(t.experimental, Float32Array),
             follow: decode(t.follow, Float32Array), fpos: decode(t.frame_p, Float32Array) };
  });

  // -- matrices (column-major, as WebGL wants them) --------------------------------------------
  function perspective(fovy, aspect, near, far) {
    const f = 1 / Math.tan(fovy / 2), nf = 1 / (near - far);
    return [f / aspect, 0, 0, 0, 0, f, 0, 0, 0, 0, (far + near) * nf, -1, 0, 0, 2 * far * near * nf, 0];
  }
  function lookAt(eye, c, up) {
    let z = [eye[0] - c[0], eye[1] - c[1], eye[2] - c[2]]; z = norm(z);
    let x = norm(cross(up, z)); const y = cross(z, x);
    return [x[0], y[0], z[0], 0, x[1], y[1], z[1], 0, x[2], y[2], z[2], 0,
            -dot(x, eye), -dot(y, eye), -dot(z, eye), 1];
  }
  function mul(a, b) {
    const o = new Array(16);
    for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) {
      let s = 0; for (let k = 0; k < 4; k++) s += a[k * 4 + j] * b[i * 4 + k]; o[i * 4 + j] = s;
    }
    return o;
  }
  function cross(a, b) { return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]; }
  function dot(a, b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
  function norm(a) { const l = Math.hypot(a[0], a[1], a[2]) || 1; return [a[0] / l, a[1] / l, a[2] / l]; }

  // -- camera: orbit around a target, which follows a body when asked ----------------------------
  const cam = { yaw: S.camera.yaw, pitch: S.camera.pitch, dist: S.camera.dist, target: S.camera.target.slice() };
  let followIndex = S.follow_default, followOffset = null;
  function eyeOf(target) {
    const cp = Math.cos(cam.pitch);
    return [target[0] + cam.dist * cp * Math.sin(cam.yaw), target[1] + cam.dist * Math.sin(cam.pitch),
            target[2] + cam.dist * cp * Math.cos(cam.yaw)];
  }
  let drag = null;
  canvas.addEventListener("mousedown", function (e) { drag = { x: e.clientX, y: e.clientY, pan: e.button !== 0 || e.shiftKey }; });
  window.addEventListener("mouseup", function () { drag = null; });
  canvas.addEventListener("contextmenu", function (e) { e.preventDefault(); });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y; drag.x = e.clientX; drag.y = e.clientY;
    if (drag.pan) {
      const eye = eyeOf(cam.target), f = norm([cam.target[0] - eye[0], cam.target[1] - eye[1], cam.target[2] - eye[2]]);
      const r = norm(cross(f, [0, 1, 0])), u = cross(r, f), s = cam.dist * 0.002;
      for (let k = 0; k < 3; k++) { const d = (-dx * r[k] + dy * u[k]) * s; cam.target[k] += d; if (followOffset) followOffset[k] += d; }
    } else {
      cam.yaw -= dx * 0.01; cam.pitch = Math.max(-1.5, Math.min(1.5, cam.pitch + dy * 0.01));
    }
    draw();
  });
  canvas.addEventListener("wheel", function (e) { e.preventDefault(); cam.dist *= Math.exp(e.deltaY * 0.001); draw(); },
                          { passive: false });

  // -- user interface ----------------------------------------------------------------------------------
  const el = function (id) { return document.getElementById(id); };
  const playBtn = el("simjax-play"), slider = el("simjax-time"), label = el("simjax-label"), speedSel = el("simjax-speed");
  const layers = Object.assign({}, S.layers);
  slider.max = String(nF - 1);
  const layerBox = el("simjax-layers");
  Object.keys(layers).forEach(function (name) {
    const lab = document.createElement("label"), box = document.createElement("input");
    box.type = "checkbox"; box.checked = layers[name]; box.dataset.layer = name;
    box.addEventListener("change", function () { layers[name] = box.checked; draw(); });
    lab.appendChild(box); lab.appendChild(document.createTextNode(name.replace("_", " "))); layerBox.appendChild(lab);
  });
  tracks.forEach(function (t, i) {
    const lab = document.createElement("label"), box = document.createElement("input");
    box.type = "checkbox"; box.checked = true;
    box.addEventListener("change", function () { t.shown = box.checked; draw(); });
    const sw = document.createElement("span"); sw.className = "swatch";
    sw.style.background = "rgb(" + t.color.map(function (c) { return Math.round(255 * c); }).join(",") + ")";
    lab.appendChild(box); lab.appendChild(sw); lab.appendChild(document.createTextNode(t.name)); el("simjax-tracks").appendChild(lab);
  });
  const followSel = el("simjax-follow");
  ["(none)"].concat(S.follow).forEach(function (name, i) {
    const o = document.createElement("option"); o.value = String(i - 1); o.textContent = name; followSel.appendChild(o);
  });
  followSel.value = String(followIndex);
  followSel.addEventListener("change", function () { followIndex = parseInt(followSel.value, 10); followOffset = null; draw(); });

  let frame = 0, time = S.times[0], playing = nF > 1, last = null;
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.has("t")) { time = parseFloat(hash.get("t")); }
  if (hash.has("frame")) { time = S.times[Math.max(0, Math.min(nF - 1, parseInt(hash.get("frame"), 10)))]; }
  if (hash.has("paused")) playing = false;
  if (hash.has("speed")) speedSel.value = hash.get("speed");
  function setFrameFromTime() {
    let lo = 0, hi = nF - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (S.times[mid] <= time + 1e-12) lo = mid; else hi = mid - 1; }
    frame = lo;
  }
  playBtn.addEventListener("click", function () { playing = !playing; last = null; updateButton(); });
  function updateButton() { playBtn.textContent = playing ? "pause" : "play"; }
  slider.addEventListener("input", function () { frame = parseInt(slider.value, 10); time = S.times[frame]; draw(); });

  // -- drawing -----------------------------------------------------------------------------------------
  function bindMesh(m) {
    gl.bindBuffer(gl.ARRAY_BUFFER, m.pos); gl.enableVertexAttribArray(A.a_pos);
    gl.vertexAttribPointer(A.a_pos, 3, gl.FLOAT, false, 0, 0);
    gl.bindBuffer(gl.ARRAY_BUFFER, m.nrm); gl.enableVertexAttribArray(A.a_nrm);
    gl.vertexAttribPointer(A.a_nrm, 3, gl.FLOAT, false, 0, 0);
    if (m.col) {
      gl.bindBuffer(gl.ARRAY_BUFFER, m.col); gl.enableVertexAttribArray(A.a_col);
      gl.vertexAttribPointer(A.a_col, 3, gl.FLOAT, false, 0, 0); gl.uniform1f(U.u_vcol, 1);
    } else { gl.disableVertexAttribArray(A.a_col); gl.vertexAttrib3f(A.a_col, 1, 1, 1); gl.uniform1f(U.u_vcol, 0); }
    gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, m.idx);
  }
  const queue = [];  // [mesh, R (9, row-major), p, color, alpha]
  function put(mi, R, p, color, alpha) { if (meshes[mi]) queue.push([mi, R, p, color, alpha]); }
  function flush() {
    const opaque = queue.filter(function (q) { return q[4] >= 0.999; });
    const clear = queue.filter(function (q) { return q[4] < 0.999; });
    gl.depthMask(true); gl.disable(gl.BLEND);
    for (const q of opaque) drawOne(q);
    gl.enable(gl.BLEND); gl.blendFunc(gl.SRC_ALPHA, gl.ONE_MINUS_SRC_ALPHA); gl.depthMask(false);
    for (const q of clear) drawOne(q);
    gl.depthMask(true); queue.length = 0;
  }
  let bound = -1;
  function drawOne(q) {
    const m = meshes[q[0]];
    if (bound !== q[0]) { bindMesh(m); bound = q[0]; }
    const R = q[1];  // row-major R: the column-major uniform is its transpose's data
    gl.uniformMatrix3fv(U.u_R, false, [R[0], R[3], R[6], R[1], R[4], R[7], R[2], R[5], R[8]]);
    gl.uniform3fv(U.u_p, q[2]); gl.uniform3fv(U.u_color, q[3]); gl.uniform1f(U.u_alpha, q[4]);
    gl.drawElements(gl.TRIANGLES, m.count, m.type, 0);
  }
  function basisAlong(a, b, radius) {  // R (row-major) taking the unit shape along y from a to b
    const d = [b[0] - a[0], b[1] - a[1], b[2] - a[2]], len = Math.hypot(d[0], d[1], d[2]);
    if (len < 1e-9) return null;
    const y = [d[0] / len, d[1] / len, d[2] / len];
    const x = norm(Math.abs(y[0]) < 0.9 ? cross(y, [1, 0, 0]) : cross(y, [0, 1, 0])), z = cross(x, y);
    return [x[0] * radius, y[0] * len, z[0] * radius, x[1] * radius, y[1] * len, z[1] * radius,
            x[2] * radius, y[2] * len, z[2] * radius];
  }
  function tint(c, t) { return t.ghost ? [0.5 * c[0] + 0.5 * t.color[0], 0.5 * c[1] + 0.5 * t.color[1], 0.5 * c[2] + 0.5 * t.color[2]] : c; }
  function draw() {
    const w = canvas.clientWidth, h = canvas.clientHeight;
    if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
    gl.viewport(0, 0, w, h);
    gl.clearColor(S.background[0], S.background[1], S.background[2], 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT); gl.enable(gl.DEPTH_TEST);
    slider.value = String(frame);
    label.textContent = "t = " + S.times[frame].toFixed(3) + " s";
    let target = cam.target;
    if (followIndex >= 0) {
      const f = tracks[0].follow, o = (frame * B + followIndex) * 3, pos = [f[o], f[o + 1], f[o + 2]];
      if (!followOffset) followOffset = [cam.target[0] - pos[0], cam.target[1] - pos[1], cam.target[2] - pos[2]];
      target = [pos[0] + followOffset[0], pos[1] + followOffset[1], pos[2] + followOffset[2]];
      cam.target = target.slice();
    }
    const eye = eyeOf(target);
    const vp = mul(perspective(0.8, w / Math.max(h, 1), cam.dist * 0.01, cam.dist * 100), lookAt(eye, target, [0, 1, 0]));
    gl.uniformMatrix4fv(U.u_vp, false, vp);
    gl.uniform3fv(U.u_light, norm([eye[0] - target[0] + 0.3 * cam.dist, eye[1] - target[1] + 0.5 * cam.dist, eye[2] - target[2]]));
    bound = -1;
    // the floor: thin lines drawn as flat boxes
    gl.uniform1f(U.u_lit, 0);
    if (layers.floor && S.floor) {
      const f = S.floor, n = f.lines, half = f.size / 2;
      for (let i = 0; i <= n; i++) {
        const c = -half + f.size * i / n, col = [0.45, 0.47, 0.5];
        put(S.unit.cylinder, basisAlong([c, f.y, -half], [c, f.y, half], f.width), [c, f.y, -half], col, 1);
        put(S.unit.cylinder, basisAlong([-half, f.y, c], [half, f.y, c], f.width), [-half, f.y, c], col, 1);
      }
      flush();
    }
    gl.uniform1f(U.u_lit, 1);
    tracks.forEach(function (t) {
      if (!t.shown) return;
      const alphaScale = t.ghost ? 0.4 : 1;
      for (let v = 0; v < V; v++) {
        const vis = S.visuals[v];
        if (!layers[vis.layer]) continue;
        const o = (frame * V + v) * 12, pz = t.poses;
        const R = [pz[o], pz[o + 1], pz[o + 2], pz[o + 3], pz[o + 4], pz[o + 5], pz[o + 6], pz[o + 7], pz[o + 8]];
        put(vis.mesh, R, [pz[o + 9], pz[o + 10], pz[o + 11]], tint(vis.color, t), vis.opacity * alphaScale);
      }
      if (layers.skeleton) {
        const NF = S.n_frame_paths, r = S.stick_radius, col = tint([0.85, 0.8, 0.7], t);
        for (const st of S.sticks) {
          const oa = (frame * NF + st[0]) * 3, ob = (frame * NF + st[1]) * 3;
          const a = [t.fpos[oa], t.fpos[oa + 1], t.fpos[oa + 2]], b = [t.fpos[ob], t.fpos[ob + 1], t.fpos[ob + 2]];
          const R = basisAlong(a, b, r);
          if (R) put(S.unit.cylinder, R, a, col, alphaScale);
          put(S.unit.sphere, [1.5 * r, 0, 0, 0, 1.5 * r, 0, 0, 0, 1.5 * r], a, col, alphaScale);
          put(S.unit.sphere, [1.5 * r, 0, 0, 0, 1.5 * r, 0, 0, 0, 1.5 * r], b, col, alphaScale);
        }
      }
      if (layers.markers) for (let m = 0; m < M; m++) {
        const o = (frame * M + m) * 3, r = S.marker_radius;
        put(S.unit.sphere, [r, 0, 0, 0, r, 0, 0, 0, r], [t.markers[o], t.markers[o + 1], t.markers[o + 2]],
            tint(S.marker_color, t), alphaScale);
      }
      if (layers.experimental_markers) for (let k = 0; k < K; k++) {
        const o = (frame * K + k) * 3, r = S.marker_radius;
        if (!isFinite(t.ex[o])) continue;
        put(S.unit.sphere, [r, 0, 0, 0, r, 0, 0, 0, r], [t.ex[o], t.ex[o + 1], t.ex[o + 2]], S.experimental_color,
            alphaScale);
      }
      if (layers.muscles) for (let p = 0; p < P; p++) {
        const n = t.count[frame * P + p], ci = (frame * P + p) * 3;
        const col = tint([t.rgb[ci] / 255, t.rgb[ci + 1] / 255, t.rgb[ci + 2] / 255], t), r = S.path_radius;
        for (let j = 0; j < n; j++) {
          const o = ((frame * P + p) * L + j) * 3, a = [t.paths[o], t.paths[o + 1], t.paths[o + 2]];
          put(S.unit.sphere, [r, 0, 0, 0, r, 0, 0, 0, r], a, col, alphaScale);
          if (j + 1 < n) {
            const b = [t.paths[o + 3], t.paths[o + 4], t.paths[o + 5]], R = basisAlong(a, b, r);
            if (R) put(S.unit.cylinder, R, a, col, alphaScale);
          }
        }
      }
      if (layers.forces) for (let e = 0; e < E; e++) {
        const o = (frame * E + e) * 3, a = [t.fp[o], t.fp[o + 1], t.fp[o + 2]], s = S.force_scale;
        const b = [a[0] + s * t.fv[o], a[1] + s * t.fv[o + 1], a[2] + s * t.fv[o + 2]], R = basisAlong(a, b, 1);
        if (R) put(S.unit.arrow, R, a, tint(S.force_color, t), alphaScale);
      }
    });
    flush();
  }
  function tick(now) {
    if (playing && nF > 1) {
      if (last !== null) {
        time += (now - last) / 1000 * parseFloat(speedSel.value);
        const t0 = S.times[0], t1 = S.times[nF - 1];
        if (time > t1) time = t0 + ((time - t0) % Math.max(t1 - t0, 1e-9));
      }
      last = now; setFrameFromTime(); draw();
    } else last = null;
    requestAnimationFrame(tick);
  }
  window.addEventListener("resize", draw);
  setFrameFromTime(); updateButton(); draw();
  window.simjaxPlayer = { frame: function () { return frame; }, ready: true };
  document.title = S.title;
  status.textContent = "";
  requestAnimationFrame(tick);
})();
