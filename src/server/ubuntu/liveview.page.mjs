// The live-view page of an ubuntu instance (liveview.html): noVNC's RFB client on
// `/stream/<id>/websockify?token=…`, view and control. The server inlines this module into the
// page; the import map it serves with the page adds the token to every noVNC module URL, and
// the VNC password comes in the page's `viewer-options` JSON.
import RFB from './novnc/core/rfb.js';
const { password } = JSON.parse(document.getElementById('viewer-options').textContent);
const screen = document.getElementById('screen');
const status = document.getElementById('status');
const url = new URL('websockify' + location.search, location.href);
url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
let retry = 500;

function say(text) {
  status.textContent = text;
  status.hidden = !text;
}

function connect() {
  const rfb = new RFB(screen, url.href, { credentials: { password }, wsProtocols: ['binary'] });
  rfb.scaleViewport = true;
  rfb.resizeSession = false;
  rfb.focusOnClick = true;
  rfb.background = '#1e1e1e';
  rfb.addEventListener('connect', () => {
    retry = 500;
    say('');
    document.body.dataset.connected = 'true';
    rfb.focus();
  });
  rfb.addEventListener('credentialsrequired', () => rfb.sendCredentials({ password }));
  rfb.addEventListener('securityfailure', (e) =>
    say('Access refused: ' + (e.detail.reason || 'security failure')),
  );
  rfb.addEventListener('disconnect', () => {
    document.body.dataset.connected = 'false';
    say('Disconnected; reconnecting…');
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 8000);
  });
  window.rfb = rfb;
}
connect();
