/**
 * Uploads into a browser instance: the same streamed upload as ubuntu instances
 * (../toolbox/upload.ts), written by a toolbox inside the instance's sandbox
 * (../toolbox/toolbox.ts) as its user, on its disk and within its quota. Relative paths are taken
 * against the instance's home; the kernel, not this code, decides what the instance may write, so
 * `..`, symlinks or absolute paths cannot lead outside what the instance itself can reach, and the
 * tools refuse anything outside its home and /tmp with a 400. The answer's `path` is the file's
 * path as Chromium sees it, ready for `DOM.setFileInputFiles`.
 */
import type { Readable } from 'node:stream';
import type { UploadResult } from '../../api/index.js';
import type { Logger } from '../../internal/log.js';
import { serverError } from '../errors.js';
import { uploadSpoolDir } from '../instances/machine.js';
import type { Sandbox } from '../sandbox/index.js';
import { Toolbox } from '../toolbox/toolbox.js';
import { InstanceFiles } from '../toolbox/fsops.js';
import { upload } from '../toolbox/upload.js';

export class BrowserFiles {
  #files: InstanceFiles | undefined;
  #toolbox: Toolbox | undefined;
  #stopped = false;

  constructor(
    /** The instance's sandbox once it exists. */
    readonly sandbox: () => Sandbox | undefined,
    readonly maxUploadBytes: number,
    readonly log: Logger,
  ) {}

  async upload(
    path: string,
    filename: string,
    mediaType: string | undefined,
    file: Readable,
  ): Promise<UploadResult> {
    let files: InstanceFiles;
    try {
      files = this.#get();
    } catch (err) {
      file.resume(); // let the request finish; the route answers with the error
      throw err;
    }
    return upload(files, path, filename, mediaType, file, this.maxUploadBytes);
  }

  /** On the instance's disk, within its quota (`FilesCapability.spoolDir`). */
  spoolDir(): string | undefined {
    return uploadSpoolDir(this.sandbox());
  }

  /** Ends the toolbox (it also dies with the sandbox). */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#toolbox?.stop();
  }

  /** The toolbox starts with the first upload, not with the instance. */
  #get(): InstanceFiles {
    if (this.#stopped) throw serverError('instance_stopping');
    if (this.#files) return this.#files;
    const sandbox = this.sandbox();
    if (!sandbox) throw serverError('instance_not_ready');
    const writable = [sandbox.home, sandbox.tmp];
    this.#toolbox = new Toolbox({
      spawn: (argv, o) => sandbox.spawn(argv, o),
      home: sandbox.home,
      writable,
      log: this.log,
    });
    this.#files = new InstanceFiles(this.#toolbox, writable);
    return this.#files;
  }
}
