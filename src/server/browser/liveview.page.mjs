// The live-view page of a browser instance (liveview.html): draws the screencast of the active
// tab on a canvas and sends mouse and keyboard back over `/stream/<id>/ws?token=…` (protocol in
// ../chromium/screencast.ts). The server inlines this module into the page, so the page stays
// one self-contained document whose own query carries the token.
const canvas = document.getElementById('screen');
const ctx = canvas.getContext('2d');
const status = document.getElementById('status');
const wsUrl = new URL('ws' + location.search, location.href);
wsUrl.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
let size = { width: 0, height: 0 };
let ws;
let drawn = 0;
let requested = 0;
let retry = 500;

function say(text) {
  status.textContent = text;
  status.hidden = !text;
}

function connect() {
  ws = new WebSocket(wsUrl);
  ws.binaryType = 'arraybuffer';
  ws.onopen = () => {
    retry = 500;
    say('Waiting for the first frame…');
  };
  ws.onmessage = async (e) => {
    if (typeof e.data === 'string') {
      const msg = JSON.parse(e.data);
      if (msg.type === 'size') size = { width: msg.width, height: msg.height };
      else if (msg.type === 'status') say(msg.text);
      return;
    }
    const seq = ++requested;
    const bitmap = await createImageBitmap(new Blob([e.data], { type: 'image/jpeg' }));
    if (seq < drawn) return bitmap.close();
    drawn = seq;
    if (canvas.width !== bitmap.width || canvas.height !== bitmap.height) {
      canvas.width = bitmap.width;
      canvas.height = bitmap.height;
    }
    ctx.drawImage(bitmap, 0, 0);
    bitmap.close();
    document.body.dataset.frames = String(drawn);
    say('');
  };
  ws.onclose = (e) => {
    if (e.code === 1008 || e.code === 4401) return say('Access refused.');
    say('Disconnected; reconnecting…');
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 8000);
  };
}

function send(msg) {
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg));
}

function modifiers(e) {
  return (e.altKey ? 1 : 0) | (e.ctrlKey ? 2 : 0) | (e.metaKey ? 4 : 0) | (e.shiftKey ? 8 : 0);
}

/** Canvas pixel → page CSS pixel. */
function point(e) {
  const r = canvas.getBoundingClientRect();
  const w = size.width || canvas.width;
  const h = size.height || canvas.height;
  return { x: ((e.clientX - r.left) * w) / r.width, y: ((e.clientY - r.top) * h) / r.height };
}

const BUTTONS = ['left', 'middle', 'right', 'back', 'forward'];
let pendingMove;
canvas.addEventListener('pointermove', (e) => {
  const first = !pendingMove;
  pendingMove = {
    type: 'mouse',
    event: 'mouseMoved',
    ...point(e),
    buttons: e.buttons,
    modifiers: modifiers(e),
  };
  if (first) requestAnimationFrame(flushMove);
});
function flushMove() {
  if (pendingMove) send(pendingMove);
  pendingMove = undefined;
}
for (const [dom, event] of [
  ['pointerdown', 'mousePressed'],
  ['pointerup', 'mouseReleased'],
]) {
  canvas.addEventListener(dom, (e) => {
    e.preventDefault();
    if (dom === 'pointerdown') {
      canvas.focus();
      canvas.setPointerCapture(e.pointerId);
    }
    flushMove();
    send({
      type: 'mouse',
      event,
      ...point(e),
      button: BUTTONS[e.button] || 'none',
      buttons: e.buttons,
      clickCount: Math.max(1, e.detail || 1),
      modifiers: modifiers(e),
    });
  });
}
canvas.addEventListener(
  'wheel',
  (e) => {
    e.preventDefault();
    const unit = e.deltaMode === 1 ? 40 : e.deltaMode === 2 ? 800 : 1;
    send({
      type: 'mouse',
      event: 'mouseWheel',
      ...point(e),
      deltaX: e.deltaX * unit,
      deltaY: e.deltaY * unit,
      modifiers: modifiers(e),
    });
  },
  { passive: false },
);
canvas.addEventListener('contextmenu', (e) => e.preventDefault());
for (const [dom, event] of [
  ['keydown', 'keyDown'],
  ['keyup', 'keyUp'],
]) {
  canvas.addEventListener(dom, (e) => {
    if (e.isComposing) return;
    e.preventDefault();
    send({
      type: 'key',
      event,
      key: e.key,
      code: e.code,
      keyCode: e.keyCode,
      location: e.location,
      modifiers: modifiers(e),
      repeat: e.repeat,
    });
  });
}
canvas.addEventListener('paste', (e) => {
  const text = e.clipboardData && e.clipboardData.getData('text/plain');
  if (text) {
    e.preventDefault();
    send({ type: 'text', text });
  }
});
connect();
