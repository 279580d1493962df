/**
 * Dialogs and file choosers a page opened: while a dialog waits the page runs nothing, so the
 * tools refuse to act (`assertNoDialog`) until `browser_handle_dialog` answers it; a file chooser
 * is answered with files on the instance (`browser_file_upload`).
 */
import { fail, type PageConnection } from './connection.js';
import { watchNavigation } from './navigation.js';

/** Refuses to act on a tab whose dialog waits for an answer (it runs nothing until then). */
export function assertNoDialog(c: PageConnection): void {
  const d = c.modal.find((m) => m.kind === 'dialog');
  if (d) {
    throw fail(
      `A ${d.type} dialog is open ("${d.message}"); answer it with browser_handle_dialog first`,
      'modal_state',
    );
  }
}

/** Answers the open dialog of the current tab. */
export async function handleDialog(
  c: PageConnection,
  accept: boolean,
  promptText: string | undefined,
): Promise<void> {
  const dialog = c.modal.find((m) => m.kind === 'dialog');
  if (!dialog) throw fail('No dialog is open', 'no_modal_state');
  const tab = c.record;
  tab.modal = tab.modal.filter((m) => m !== dialog);
  await c.act(async () => {
    const nav = watchNavigation(c);
    await c.send('Page.handleJavaScriptDialog', {
      accept,
      ...(promptText !== undefined && { promptText }),
    });
    await nav.settle();
  });
}

/**
 * Answers the open file chooser of the current tab with files on the instance (paths as its
 * browser sees them); no paths cancels it.
 */
export async function uploadFiles(
  c: PageConnection,
  paths: readonly string[] | undefined,
): Promise<void> {
  const chooser = c.modal.find((m) => m.kind === 'fileChooser');
  if (!chooser || chooser.kind !== 'fileChooser') {
    throw fail('No file chooser is open: click the file input first', 'no_modal_state');
  }
  if (paths && paths.length > 1 && !chooser.multiple) {
    throw fail('This file input takes one file', 'validation_error');
  }
  const tab = c.record;
  tab.modal = tab.modal.filter((m) => m !== chooser);
  if (!paths || paths.length === 0) return;
  try {
    await c.send('DOM.setFileInputFiles', {
      files: [...paths],
      backendNodeId: chooser.backendNodeId,
    });
  } catch (err) {
    throw fail(
      `Cannot set the files: ${err instanceof Error ? err.message : String(err)}`,
      'upload_failed',
    );
  }
}
