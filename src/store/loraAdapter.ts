/**
 * What kind of model a published checkpoint folder is. A LoRA run (`trainer.lora`) publishes each
 * version as a peft adapter directory of the servers' base model (`model.path`), which holds peft's
 * `adapter_config.json`; a full fine-tuning run publishes whole Hugging Face model directories,
 * which never do. Model servers load the first as a runtime LoRA adapter beside the base model,
 * and reload their weights from the second.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';

/** peft's adapter config file: its presence is what makes a checkpoint folder an adapter. */
export const LORA_ADAPTER_CONFIG_FILE = 'adapter_config.json';

/** Whether the checkpoint folder `folder` is a LoRA adapter (rather than a whole model). */
export async function isLoraAdapterFolder(folder: string): Promise<boolean> {
  const stat = await fs.stat(path.join(folder, LORA_ADAPTER_CONFIG_FILE)).catch(() => undefined);
  return stat?.isFile() ?? false;
}
