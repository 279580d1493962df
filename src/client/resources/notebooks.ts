import type {
  AddCellRequest,
  ExecuteCellRequest,
  KernelInfo,
  Notebook,
  NotebookCell,
  NotebookCreateRequest,
  NotebookDeleteResult,
} from '../../api/index.js';
import type { Core, RequestOptions } from '../core.js';

/** Kernels and notebooks of an instance. */
export class Notebooks {
  constructor(private readonly core: Core) {}

  /** `GET /v1/instance/{instance_id}/notebook/kernels`. */
  kernels(instanceId: string, opts?: RequestOptions): Promise<KernelInfo[]> {
    return this.core.request('listKernels', { params: { instance_id: instanceId } }, opts);
  }

  /** `POST /v1/instance/{instance_id}/notebook/create`. */
  create(
    instanceId: string,
    body: NotebookCreateRequest,
    opts?: RequestOptions,
  ): Promise<Notebook> {
    return this.core.request('notebookCreate', { params: { instance_id: instanceId }, body }, opts);
  }

  /** `GET /v1/instance/{instance_id}/notebook/{notebook_id}`. */
  get(instanceId: string, notebookId: string, opts?: RequestOptions): Promise<Notebook> {
    const params = { instance_id: instanceId, notebook_id: notebookId };
    return this.core.request('notebookGet', { params }, opts);
  }

  /** `POST /v1/instance/{instance_id}/notebook/{notebook_id}/delete`. */
  delete(
    instanceId: string,
    notebookId: string,
    opts?: RequestOptions,
  ): Promise<NotebookDeleteResult> {
    const params = { instance_id: instanceId, notebook_id: notebookId };
    return this.core.request('notebookDelete', { params }, opts);
  }

  /** `POST /v1/instance/{instance_id}/notebook/{notebook_id}/cell`. */
  addCell(
    instanceId: string,
    notebookId: string,
    body: AddCellRequest,
    opts?: RequestOptions,
  ): Promise<NotebookCell> {
    const params = { instance_id: instanceId, notebook_id: notebookId };
    return this.core.request('notebookAddCell', { params, body }, opts);
  }

  /** `POST /v1/instance/{instance_id}/notebook/{notebook_id}/cell/{cell_id}/execute`. */
  executeCell(
    instanceId: string,
    notebookId: string,
    cellId: string,
    body: ExecuteCellRequest = {},
    opts?: RequestOptions,
  ): Promise<NotebookCell> {
    const params = { instance_id: instanceId, notebook_id: notebookId, cell_id: cellId };
    return this.core.request('notebookExecuteCell', { params, body }, opts);
  }

  /** `POST /v1/instance/{instance_id}/notebook/{notebook_id}/execute`: all cells, in order. */
  execute(
    instanceId: string,
    notebookId: string,
    body: ExecuteCellRequest = {},
    opts?: RequestOptions,
  ): Promise<NotebookCell[]> {
    const params = { instance_id: instanceId, notebook_id: notebookId };
    return this.core.request('notebookExecute', { params, body }, opts);
  }
}
